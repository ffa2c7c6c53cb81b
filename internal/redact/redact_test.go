package redact

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://user:pass@127.0.0.1:8081", "http://xxxxx@127.0.0.1:8081"},
		{"http://user:pass@127.0.0.1:port", "http://xxxxx@127.0.0.1:port"}, // does not parse
		{"http://TOKEN@host/x?y=1", "http://xxxxx@host/x?y=1"},
		{"http://u:p@ss@host", "http://xxxxx@host"}, // an unescaped "@" in the password
		{"https://u:p%zz@host", "https://xxxxx@host"},
		{"http://host/path@x", "http://host/path@x"}, // "@" in the path, not the authority
		{"http://host?q=a@b", "http://host?q=a@b"},
		{"http://127.0.0.1:8081", "http://127.0.0.1:8081"},
		{"not a url", "not a url"},
		{"user:pass@host:8080", "xxxxx@host:8080"}, // the scheme forgotten
		{"//u:p@host", "//xxxxx@host"},
		{"", ""},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
