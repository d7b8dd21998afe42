package stdio

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mcp-bastion/bastion/internal/config"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// Program describes a stdio MCP server built on the core: who it is and
// which tools it offers.
type Program struct {
	Info         mcp.Implementation
	Instructions string
	// ArgumentErrors selects how argument errors are reported.
	ArgumentErrors session.ArgumentErrorMode
	// Tools builds the tools from the validated configuration.
	Tools func(cfg *config.Config, log *slog.Logger) ([]tool.Tool, error)
}

// Main runs p as a process: it reads the MCP_* configuration (exit 2 when
// invalid), logs to stderr as `bastion serve` does, serves one session on
// stdin and stdout, and returns the exit status (0 clean drain, 1 abnormal
// end, 2 bad configuration). Call it as os.Exit(stdio.Main(p)).
func Main(p Program) int {
	signal.Ignore(syscall.SIGPIPE)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	cfg, err := config.Load(os.Environ())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: invalid configuration:\n", p.Info.Name)
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(os.Stderr, "  %s\n", line)
		}
		return 2
	}
	log := cfg.NewLogger(os.Stderr)
	cfg.WarnUnrelated(context.Background(), log)
	tools, err := p.Tools(cfg, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Info.Name, err)
		return 2
	}
	srv, err := NewServer(cfg, p, tools, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Info.Name, err)
		return 2
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, "starting", slog.String("server", p.Info.Name), slog.String("version", p.Info.Version))
	stdin, stdout, restore := OpenStdio()
	defer restore()
	if err := Serve(context.Background(), srv, stdin, stdout, cfg.MaxFrameBytes, sigs, log); err != nil {
		log.Error("session ended abnormally", slog.String("error", err.Error()))
		return 1
	}
	log.Info("drained; exiting")
	return 0
}

// NewServer builds the session server of p with tools, applying the
// guardrail settings of cfg. It is the one place where configuration
// becomes session options, for `bastion serve` and every example alike.
func NewServer(cfg *config.Config, p Program, tools []tool.Tool, log *slog.Logger) (*session.Server, error) {
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		return nil, err
	}
	return session.NewServer(session.Options{
		Tools:          reg,
		Info:           p.Info,
		Instructions:   p.Instructions,
		MaxConcurrency: cfg.MaxConcurrency,
		QueueTimeout:   cfg.QueueTimeout,
		CallTimeout:    cfg.CallTimeout,
		DrainGrace:     cfg.DrainGrace,
		ArgumentErrors: p.ArgumentErrors,
		Logger:         log,
	})
}
