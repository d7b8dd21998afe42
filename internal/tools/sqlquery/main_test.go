package sqlquery

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

// TestMain shares one throwaway PostgreSQL cluster among the package's
// tests and stops it at the end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Runner(m)) }
