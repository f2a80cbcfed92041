//go:build startfloor_deps

package main

// Every package from another module that a package of aerie imports, as
// `go list` finds them from cmd/aerie (TestDepsAreAeries keeps the list
// true).
import (
	_ "github.com/anthropics/anthropic-sdk-go/v2"
	_ "github.com/anthropics/anthropic-sdk-go/v2/option"
	_ "github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	_ "github.com/google/uuid"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/openai/openai-go/v3/option"
	_ "github.com/openai/openai-go/v3/packages/ssestream"
	_ "github.com/openai/openai-go/v3/responses"
	_ "github.com/pelletier/go-toml/v2"
	_ "github.com/pelletier/go-toml/v2/unstable"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/pflag"
	_ "golang.org/x/net/http/httpguts"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
	_ "modernc.org/sqlite/lib"
	_ "sigs.k8s.io/yaml"
)
