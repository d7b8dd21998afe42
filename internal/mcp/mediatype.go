package mcp

import "mime"

// MediaType is mime.ParseMediaType without its map of parameters: the
// media type and the error ParseMediaType returns for v. Every Streamable
// HTTP exchange carries the two types below, almost always written
// without parameters; those are read without parsing or allocating.
func MediaType(v string) (string, error) {
	switch v {
	case "application/json", "text/event-stream":
		return v, nil
	}
	mt, _, err := mime.ParseMediaType(v)
	return mt, err
}
