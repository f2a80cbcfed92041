package dburl

import "testing"

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		backend backend
		target  string
		wantErr bool
	}{
		{url: "postgres://u:p@db:5432/aerie?sslmode=disable", backend: backendPostgres, target: "postgres://u:p@db:5432/aerie?sslmode=disable"},
		{url: "postgresql://db/aerie", backend: backendPostgres, target: "postgresql://db/aerie"},
		{url: "POSTGRES://db/aerie", backend: backendPostgres, target: "POSTGRES://db/aerie"},
		{url: "sqlite:///home/me/.aerie/sessions.db", target: "/home/me/.aerie/sessions.db"},
		{url: "sqlite:/home/me/.aerie/sessions.db", target: "/home/me/.aerie/sessions.db"},
		{url: "sqlite:relative/sessions.db", target: "relative/sessions.db"},
		{url: "file:/home/me/sessions.db", target: "/home/me/sessions.db"},
		{url: "file:///home/me/sessions.db", target: "/home/me/sessions.db"},
		{url: "/home/me/sessions.db", target: "/home/me/sessions.db"},
		{url: "sessions.db", target: "sessions.db"},
		{url: "/path with spaces/#1/sessions.db", target: "/path with spaces/#1/sessions.db"},
		{url: "", wantErr: true},
		{url: "sqlite:", wantErr: true},
		{url: "mysql://db/aerie", wantErr: true},
		{url: "sqlite:/tmp/x.db?_pragma=foreign_keys(0)", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			b, target, err := parseURL(tt.url)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseURL(%q) = %v, %q; want an error", tt.url, b, target)
				}
				return
			}
			if err != nil || b != tt.backend || target != tt.target {
				t.Errorf("parseURL(%q) = %v, %q, %v; want %v, %q", tt.url, b, target, err, tt.backend, tt.target)
			}
		})
	}
}
