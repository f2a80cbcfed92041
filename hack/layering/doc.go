// Package layering holds the test of which packages may link which: the
// parts of the runner that only speak the transcript link no database
// driver, model SDK or MCP SDK; the neutral provider types link no model
// SDK; the controller and the kubectl plugin link nothing of the runner but
// the leaves they share with it. It has no code of its own.
package layering
