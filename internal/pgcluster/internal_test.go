package pgcluster

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestDebianBinDirPicksHighestVersionWithServer(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "10", "15", "17", "beta"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		names := []string{"initdb", "pg_ctl"}
		if v == "17" {
			names = []string{"pg_ctl"} // client-only leftovers: no initdb
		}
		for _, name := range names {
			if err := os.WriteFile(filepath.Join(bin, name), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, ok := debianBinDir(root)
	if want := filepath.Join(root, "15", "bin"); !ok || got != want {
		t.Errorf("debianBinDir = %q, %v; want %q", got, ok, want)
	}
	if _, ok := debianBinDir(filepath.Join(root, "missing")); ok {
		t.Error("debianBinDir found a server in a missing directory")
	}
}

func TestCompareVersions(t *testing.T) {
	got := []string{"10", "9.6", "15", "9.5", "16"}
	slices.SortFunc(got, compareVersions)
	if want := []string{"9.5", "9.6", "10", "15", "16"}; !slices.Equal(got, want) {
		t.Errorf("sorted %v, want %v", got, want)
	}
}

func TestFindBinDirOverride(t *testing.T) {
	t.Setenv("PG_BIN", filepath.Join(t.TempDir(), "nothing-here"))
	if _, err := FindBinDir(); !errors.Is(err, ErrNotFound) {
		t.Errorf("FindBinDir with a bad PG_BIN: %v, want ErrNotFound", err)
	}
}

func TestStartWithoutBinariesIsErrNotFound(t *testing.T) {
	t.Setenv("PG_BIN", filepath.Join(t.TempDir(), "nothing-here"))
	if _, err := Start(t.Context(), Options{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Start: %v, want ErrNotFound", err)
	}
}

func TestDSNQuotesOddValues(t *testing.T) {
	c := &Cluster{root: "/tmp/a dir/it's", port: 5433, user: `we\ird`}
	cfg, err := pgx.ParseConfig(c.DSN("my db"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != c.root || cfg.Port != 5433 || cfg.User != c.user || cfg.Database != "my db" {
		t.Errorf("DSN %q parses to host=%q port=%d user=%q database=%q", c.DSN("my db"), cfg.Host, cfg.Port, cfg.User, cfg.Database)
	}
	if got := c.SuperuserDSN(""); !strings.Contains(got, " user=postgres dbname=postgres ") {
		t.Errorf("SuperuserDSN(\"\") = %q, want user=postgres dbname=postgres", got)
	}
}
