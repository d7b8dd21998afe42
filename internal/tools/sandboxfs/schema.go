package sandboxfs

import (
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/tool"
)

const inputSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "relative_path": {
      "type": "string",
      "minLength": 1,
      "maxLength": 4096,
      "description": "Path of the file, relative to the data directory, with / as separator. Absolute paths and paths that leave the directory are refused."
    },
    "max_bytes": {
      "type": "integer",
      "minimum": 1,
      "maximum": %[1]d,
      "default": %[1]d,
      "description": "Largest file accepted, in bytes. A larger file is refused, not truncated."
    },
    "encoding": {
      "type": "string",
      "enum": ["utf-8", "base64"],
      "default": "utf-8",
      "description": "utf-8 returns the file as text and refuses invalid UTF-8 and control characters other than tab, LF and CR; base64 returns any bytes as standard base64."
    }
  },
  "required": ["relative_path"],
  "additionalProperties": false
}`

const outputSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "relative_path": {"type": "string", "description": "The requested path, as given."},
    "size_bytes": {"type": "integer", "minimum": 0, "description": "Size of the file in bytes."},
    "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
    "content": {"type": "string", "description": "The file, as text or standard base64."}
  },
  "required": ["relative_path", "size_bytes", "encoding", "content"],
  "additionalProperties": false
}`

func descriptor(maxBytes int64, allowHardLinks bool) tool.Descriptor {
	refused := "directories, pipes, sockets, devices"
	if !allowHardLinks {
		refused += " and files with more than one hard link"
	}
	return tool.Descriptor{
		Name:  Name,
		Title: "Read a sandboxed file",
		Description: "Reads one regular file from the server's data directory and returns it as UTF-8 text or base64. " +
			"relative_path is resolved by the kernel beneath that directory: absolute paths, and \"..\" or symbolic links that lead out of it, are refused, as are " +
			refused + ". " +
			fmt.Sprintf("Files larger than max_bytes (at most %d) are refused, never truncated. ", maxBytes) +
			"With encoding \"utf-8\" (the default) a file that is not valid UTF-8, or holds control characters other than tab, LF and CR, is refused; use \"base64\" for binary files.",
		InputSchema:  jsontext.Value(fmt.Sprintf(inputSchema, maxBytes)),
		OutputSchema: jsontext.Value(outputSchema),
		Annotations:  tool.ReadOnly,
	}
}
