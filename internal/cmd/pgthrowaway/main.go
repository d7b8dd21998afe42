// Command pgthrowaway starts a throwaway PostgreSQL cluster with the sample
// dataset for the README's demo: it prints "MCP_SQL_DSN=<dsn>" on stdout once
// the database is ready, then waits until its stdin closes or it gets
// SIGINT/SIGTERM, and stops the cluster (deleting it). It is a development
// aid, never shipped; the cluster has no password and no durability.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcp-bastion/bastion/internal/pgcluster"
)

func main() { os.Exit(run()) }

func run() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgthrowaway:", err)
		return 1
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Stop(stopCtx); err != nil {
			fmt.Fprintln(os.Stderr, "pgthrowaway: stop:", err)
		}
	}()
	const db = "demo"
	if err := c.CreateDatabase(ctx, db); err != nil {
		fmt.Fprintln(os.Stderr, "pgthrowaway:", err)
		return 1
	}
	if err := c.LoadSample(ctx, db); err != nil {
		fmt.Fprintln(os.Stderr, "pgthrowaway:", err)
		return 1
	}
	fmt.Printf("MCP_SQL_DSN=%s\n", c.DSN(db))

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-sigs:
	case <-eof:
	}
	return 0
}
