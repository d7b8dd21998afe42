package pgcluster

// PostmasterPID exposes the server's process id to tests, which check that
// Stop really ends it.
func PostmasterPID(c *Cluster) int { return c.pid }
