// Package testenv provides real test infrastructure for aerie's integration
// tests: a Kubernetes control plane (envtest), PostgreSQL, and the helpers
// that start, isolate and tear them down per test.
//
// Everything here runs real servers rather than fakes, so a test that uses it
// needs the corresponding binaries on the machine. A missing dependency never
// passes silently: under `go test -short` the test is skipped, otherwise it
// fails with instructions for installing what is missing.
//
// PostgreSQL: StartPostgres runs a throwaway server from the machine's
// PostgreSQL server binaries (`apt-get install -y postgresql` on Debian and
// Ubuntu), or uses the server named by DATABASE_URL when that is set.
// NewDatabase gives each test its own database on that server.
package testenv
