package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aerie-run/aerie/runner/tools"
)

// Tool is one tool of an MCP server, offered as mcp__<id>__<tool>.
type Tool struct {
	c      *conn
	name   string
	remote string
	desc   string
	schema json.RawMessage
}

var _ tools.Tool = (*Tool)(nil)

// newTool makes the tool t of c's server.
func newTool(c *conn, name string, t *sdk.Tool) (*Tool, error) {
	schema, err := inputSchema(t.InputSchema)
	if err != nil {
		return nil, err
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return &Tool{c: c, name: name, remote: t.Name, desc: desc, schema: schema}, nil
}

// inputSchema returns the server's schema for a tool's arguments as an
// object schema: model APIs want {"type": "object", ...} at the top.
func inputSchema(s any) (json.RawMessage, error) {
	if s == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("its input schema cannot be encoded: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.New("its input schema is not a JSON object")
	}
	switch m["type"] {
	case "object":
		return b, nil
	case nil:
		m["type"] = "object"
		return json.Marshal(m)
	}
	return nil, fmt.Errorf("its input schema is of type %v; tool arguments are an object", m["type"])
}

// Name implements tools.Tool.
func (t *Tool) Name() string { return t.name }

// Description implements tools.Tool: the server's description.
func (t *Tool) Description() string { return t.desc }

// Schema implements tools.Tool: the server's input schema.
func (t *Tool) Schema() json.RawMessage { return t.schema }

// Server returns the id of the tool's server.
func (t *Tool) Server() string { return t.c.srv.ID }

// ExecutorOf implements tools.Placed: the executor the tool's server runs
// on, "" for the default; the hooks of its calls run there.
func (t *Tool) ExecutorOf(json.RawMessage) string { return t.c.other() }

// Run calls the tool on its server, within the server's tool timeout.
// The result's content becomes text; a result the server marks as an
// error, a protocol error, a timeout and a lost connection are error
// results.
func (t *Tool) Run(ctx context.Context, call json.RawMessage) tools.Result {
	session, err := t.c.current()
	if err != nil {
		return errorf("%s: %v", t.name, err)
	}
	args := json.RawMessage(bytes.TrimSpace(call))
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	timeout := t.c.srv.ToolTimeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return errorf("%s: no result within the tool timeout of %s; the call was cancelled", t.name, timeout)
		case ctx.Err() != nil:
			return errorf("%s: cancelled", t.name)
		case errors.Is(err, sdk.ErrConnectionClosed):
			return errorf("%s: the connection to MCP server %s was lost", t.name, t.c.label())
		}
		return errorf("%s: %s", t.name, t.c.srv.Resolved.Mask(err.Error()))
	}
	return tools.Result{Content: t.c.srv.Resolved.maskResult(Text(res)), IsError: res.IsError}
}

// Text renders a tool result for the model, which reads text: text
// content as it is, embedded text resources with their URI, and a short
// note for what cannot be shown (images, audio, binary resources). With
// no content, the structured content is given as JSON.
func Text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			s := "[resource: " + c.URI
			if c.Name != "" {
				s += " (" + c.Name + ")"
			}
			if c.Description != "" {
				s += ": " + c.Description
			}
			parts = append(parts, s+"]")
		case *sdk.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
				parts = append(parts, "[resource]")
			case r.Text != "" || r.Blob == nil:
				parts = append(parts, fmt.Sprintf("[resource: %s]\n%s", r.URI, r.Text))
			default:
				parts = append(parts, fmt.Sprintf("[resource: %s, %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 {
		return "(the tool returned no content)"
	}
	return strings.Join(parts, "\n")
}

func errorf(format string, args ...any) tools.Result {
	return tools.Result{Content: fmt.Sprintf(format, args...), IsError: true}
}
