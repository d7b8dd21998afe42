/*
 * Times libpg_query's C entry points on one query read from stdin, with no
 * Go and no cgo in the way: the floor under any parse-tree policy built on
 * pg_query_go. See docs/sql-benchmark.md; bench/libpgquery/run.sh builds and
 * runs it against the libpg_query sources vendored in the pg_query_go
 * module that go.mod pins.
 *
 *   raw_parse       the PostgreSQL parser alone (pg_query_raw_parse): text to
 *                   an in-memory node tree, freed with its memory context
 *   parse_protobuf  pg_query_parse_protobuf, what pg_query_go's Parse calls:
 *                   the parse plus protobuf-c serialisation of the tree
 *   parse_json      pg_query_parse: the parse plus the JSON writer
 *   deparse         pg_query_deparse_protobuf of that protobuf, what
 *                   pg_query_go's Deparse calls: protobuf-c unpacking plus
 *                   the deparser
 *
 * Each is run ROUNDS times for ITERS iterations; the median per call is
 * printed in microseconds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_query.h"
#include "pg_query_internal.h"

enum { ROUNDS = 7, MAX_QUERY = 1 << 20 };

static double
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a, y = *(const double *) b;

	return (x > y) - (x < y);
}

static const char *query;
static PgQueryProtobuf tree;

static void
raw_parse(void)
{
	MemoryContext ctx = pg_query_enter_memory_context();
	PgQueryInternalParsetreeAndError r = pg_query_raw_parse(query, PG_QUERY_PARSE_DEFAULT);

	if (r.error != NULL)
	{
		fprintf(stderr, "raw_parse: %s\n", r.error->message);
		exit(1);
	}
	free(r.stderr_buffer);
	pg_query_exit_memory_context(ctx);
}

static void
parse_protobuf(void)
{
	PgQueryProtobufParseResult r = pg_query_parse_protobuf(query);

	if (r.error != NULL)
	{
		fprintf(stderr, "parse_protobuf: %s\n", r.error->message);
		exit(1);
	}
	pg_query_free_protobuf_parse_result(r);
}

static void
parse_json(void)
{
	PgQueryParseResult r = pg_query_parse(query);

	if (r.error != NULL)
	{
		fprintf(stderr, "parse_json: %s\n", r.error->message);
		exit(1);
	}
	pg_query_free_parse_result(r);
}

static void
deparse(void)
{
	PgQueryDeparseResult r = pg_query_deparse_protobuf(tree);

	if (r.error != NULL)
	{
		fprintf(stderr, "deparse: %s\n", r.error->message);
		exit(1);
	}
	pg_query_free_deparse_result(r);
}

static void
measure(const char *name, void (*fn) (void), long iters)
{
	double		per_call[ROUNDS];

	for (long i = 0; i < iters / 10 + 1; i++)
		fn();					/* warm up */
	for (int r = 0; r < ROUNDS; r++)
	{
		double		start = now_ns();

		for (long i = 0; i < iters; i++)
			fn();
		per_call[r] = (now_ns() - start) / iters / 1e3;
	}
	qsort(per_call, ROUNDS, sizeof per_call[0], cmp_double);
	printf("%-15s %10.1f us/op  (min %.1f, max %.1f, %d rounds of %ld)\n",
		   name, per_call[ROUNDS / 2], per_call[0], per_call[ROUNDS - 1], ROUNDS, iters);
}

int
main(int argc, char **argv)
{
	static char buf[MAX_QUERY + 1];
	size_t		n = fread(buf, 1, MAX_QUERY, stdin);
	long		iters = argc > 1 ? atol(argv[1]) : 2000;
	PgQueryProtobufParseResult parsed;

	if (n == 0 || n == MAX_QUERY || iters < 1)
	{
		fprintf(stderr, "usage: libpgquery-bench [ITERS] < query.sql (at most %d bytes)\n", MAX_QUERY - 1);
		return 2;
	}
	buf[n] = '\0';
	query = buf;
	pg_query_init();

	parsed = pg_query_parse_protobuf(query);
	if (parsed.error != NULL)
	{
		fprintf(stderr, "the query does not parse: %s\n", parsed.error->message);
		return 1;
	}
	tree = parsed.parse_tree;

	printf("query: %zu bytes, protobuf tree: %u bytes\n", n, tree.len);
	measure("raw_parse", raw_parse, iters * 10);
	measure("parse_protobuf", parse_protobuf, iters);
	measure("parse_json", parse_json, iters * 4);
	measure("deparse", deparse, iters);
	pg_query_free_protobuf_parse_result(parsed);
	return 0;
}
