package pgcluster

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// sampleSQL is the sample dataset; see [Cluster.LoadSample].
//
//go:embed sample.sql
var sampleSQL string

// SampleSQL returns the text of the sample dataset (sample.sql in this
// package's directory), for loading it some other way, with psql say.
func SampleSQL() string { return sampleSQL }

// Exec runs sql in database db ("" means "postgres") as the superuser, on a
// connection of its own. sql may hold several statements: without
// arguments pgx uses the simple query protocol, which runs them as one
// implicit transaction unless sql says otherwise. That is right for fixture
// text written by trusted test code and wrong for anything else.
func (c *Cluster) Exec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, c.SuperuserDSN(db))
	if err != nil {
		return fmt.Errorf("pgcluster: connect: %w", err)
	}
	_, err = conn.Exec(ctx, sql)
	cerr := conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("pgcluster: exec: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("pgcluster: close: %w", cerr)
	}
	return nil
}

// CreateDatabase creates database name, a copy of template1 owned by the
// superuser. The ordinary login role may connect to it but, as PostgreSQL 15
// and later leave schema public to its owner, create nothing in it.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	if err := c.Exec(ctx, "postgres", "CREATE DATABASE "+quoteIdent(name)); err != nil {
		return fmt.Errorf("pgcluster: create database: %w", err)
	}
	return nil
}

// DropDatabase drops database name if it exists, ending its sessions first.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	if err := c.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("pgcluster: drop database: %w", err)
	}
	return nil
}

// LoadSample loads the sample dataset into database db, which must not hold
// schema reporting yet, and lets the ordinary login role read it (USAGE on
// the schema, SELECT on its tables, views and sequences, nothing more). It
// is all or nothing.
func (c *Cluster) LoadSample(ctx context.Context, db string) error {
	role := quoteIdent(c.user)
	sql := sampleSQL + `
GRANT USAGE ON SCHEMA reporting TO ` + role + `;
GRANT SELECT ON ALL TABLES IN SCHEMA reporting TO ` + role + `;
GRANT SELECT ON ALL SEQUENCES IN SCHEMA reporting TO ` + role + `;
`
	if err := c.Exec(ctx, db, sql); err != nil {
		return fmt.Errorf("pgcluster: load sample: %w", err)
	}
	return nil
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }
