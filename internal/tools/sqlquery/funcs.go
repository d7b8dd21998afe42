package sqlquery

import (
	"strings"

	"github.com/mcp-bastion/bastion/internal/glob"
)

// denyRule refuses every function whose name matches Pattern. A '*' in a
// pattern matches any run of characters (possibly empty); every other
// character matches itself. Patterns are compared with the last component
// of the name the parser resolved, so pg_catalog.pg_sleep, public.pg_sleep,
// PG_SLEEP and U&"pg\005fsleep" all meet the pattern pg_sleep*, while the
// quoted "PG_SLEEP" (a different function to PostgreSQL) does not.
type denyRule struct {
	Pattern string
	// Class says why the functions are refused; docs/sql-policy.md lists
	// the rules under these headings.
	Class string
}

// Classes of denied functions.
const (
	classRemote    = "connections to other servers"
	classLargeObj  = "large objects"
	classLocks     = "advisory locks"
	classSleep     = "holding the connection"
	classFiles     = "server file system"
	classBackends  = "signalling and administering the server"
	classSession   = "configuration and session state"
	classNotify    = "notifications"
	classWAL       = "replication, WAL and backup control"
	classStats     = "statistics and caches"
	classSequences = "sequence mutators and transaction ids"
	classDynamic   = "functions that run SQL given as text"
	classStorage   = "index, storage and catalog maintenance"
)

// denyRules is the built-in denylist. It holds functions whose effects
// reach past the read-only, rolled-back transaction the executor runs
// (files, other servers, locks held by the session, WAL, sequences,
// statistics), that run SQL the policy never saw, or that hold the
// connection on purpose. The read-only transaction and the role remain the
// boundary; this list only keeps the model from reaching for them.
var denyRules = []denyRule{
	{"dblink*", classRemote},
	{"http", classRemote},
	{"http_*", classRemote},

	{"lo_*", classLargeObj},
	{"loread", classLargeObj},
	{"lowrite", classLargeObj},

	{"pg_*advisory*", classLocks},

	{"pg_sleep*", classSleep},

	{"pg_read_file*", classFiles},
	{"pg_read_binary_file*", classFiles},
	{"pg_ls_*", classFiles},
	{"pg_stat_file*", classFiles},
	{"pg_file_*", classFiles},
	{"pg_logdir_ls", classFiles},
	{"pg_current_logfile*", classFiles},
	{"pg_show_all_file_settings", classFiles},
	{"pg_hba_file_rules", classFiles},
	{"pg_ident_file_mappings", classFiles},

	{"pg_terminate_backend", classBackends},
	{"pg_cancel_backend", classBackends},
	{"pg_reload_conf", classBackends},
	{"pg_rotate_logfile*", classBackends},
	{"pg_log_backend_memory_contexts", classBackends},
	{"pg_promote", classBackends},

	{"set_config", classSession},
	{"setseed", classSession},

	{"pg_notify", classNotify},

	{"pg_*replication_slot*", classWAL},
	{"pg_replication_origin_*", classWAL},
	{"pg_logical_*", classWAL},
	{"pg_switch_*", classWAL},
	{"pg_wal_replay_*", classWAL},
	{"pg_xlog_replay_*", classWAL},
	{"pg_create_restore_point", classWAL},
	{"pg_backup_*", classWAL},
	{"pg_start_backup", classWAL},
	{"pg_stop_backup", classWAL},
	{"pg_log_standby_snapshot", classWAL},

	{"pg_stat_reset*", classStats},
	{"pg_stat_statements_reset", classStats},
	{"pg_buffercache_evict*", classStats},

	{"nextval", classSequences},
	{"setval", classSequences},
	{"txid_current", classSequences},
	{"pg_current_xact_id", classSequences},

	{"query_to_xml*", classDynamic},
	{"cursor_to_xml*", classDynamic},
	{"table_to_xml*", classDynamic},
	{"schema_to_xml*", classDynamic},
	{"database_to_xml*", classDynamic},
	{"ts_stat", classDynamic},
	{"ts_rewrite", classDynamic},
	{"crosstab*", classDynamic},
	{"connectby", classDynamic},
	{"xpath_table", classDynamic},

	{"brin_summarize_*", classStorage},
	{"brin_desummarize_range", classStorage},
	{"gin_clean_pending_list", classStorage},
	{"pg_truncate_visibility_map", classStorage},
	{"heap_force_*", classStorage},
	{"pg_import_system_collations", classStorage},
	{"pg_nextoid", classStorage},
	{"binary_upgrade_*", classStorage},
	{"pg_set_*_stats", classStorage},
	{"pg_clear_*_stats", classStorage},
	{"pg_restore_*_stats", classStorage},
}

// globMatch reports whether name matches pattern, where '*' matches any run
// of bytes and every other byte matches itself (a quoted identifier may
// contain any byte, so path.Match's syntax would not do).
func globMatch(pattern, name string) bool { return glob.Match(pattern, name) }

// validFunctionName reports whether s can name a function in an option: not
// empty, no longer than PostgreSQL keeps identifiers, and no NUL.
func validFunctionName(s string) bool {
	return s != "" && len(s) <= maxIdentifierBytes && !strings.ContainsRune(s, 0)
}

// maxIdentifierBytes is NAMEDATALEN-1: the parser truncates longer
// identifiers, so a longer name in an option could never match.
const maxIdentifierBytes = 63
