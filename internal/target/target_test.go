package target

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8081":     "http://127.0.0.1:8081",
		"HTTP://Example.COM:80/":    "http://example.com",
		"https://b:443":             "https://b",
		"http://[::1]:65535":        "http://[::1]:65535",
		"http://127.0.0.1:1/prefix": "http://127.0.0.1:1/prefix",
		"http://a:":                 "http://a",
	} {
		u, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if got := u.String(); got != want {
			t.Errorf("Parse(%q) = %q, want %q", in, got, want)
		}
	}
}

// Each refusal says what is wrong in a few words, names the URL once,
// and carries no package prefix for callers to pile theirs on.
func TestParseRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8081":         `"127.0.0.1:8081": URLs need http:// or https://, such as http://127.0.0.1:8081`,
		"localhost:8081":         `"localhost:8081": URLs need http:// or https://, such as http://localhost:8081`,
		"http:127.0.0.1:8081":    `"http:127.0.0.1:8081": URLs need http:// or https://, such as http://127.0.0.1:8081`,
		"https:/b:1":             `"https:/b:1": URLs need http:// or https://, such as https://b:1`,
		"//b:1":                  `"//b:1": URLs need http:// or https://, such as http://b:1`,
		"http://127.0.0.1:99999": `"http://127.0.0.1:99999": port 99999 out of range: want 1 to 65535`,
		"http://127.0.0.1:0":     `"http://127.0.0.1:0": port 0 out of range: want 1 to 65535`,
		"http://127.0.0.1:port":  `"http://127.0.0.1:port": invalid port ":port" after host`,
		"ftp://a":                `"ftp://a": scheme must be http or https`,
		"http://":                `"http://": no host`,
		"http://:8080":           `"http://:8080": no host`,
		"http://a?x=1":           `"http://a?x=1": must not have a query or fragment`,
		"http://a#f":             `"http://a#f": must not have a query or fragment`,
		"http://u:p@a":           `"http://xxxxx@a": must not carry user information`,
		"u:p@a:1":                `"xxxxx@a:1": must not carry user information`,
	} {
		_, err := Parse(in)
		var te *Error
		if !errors.As(err, &te) {
			t.Errorf("Parse(%q): %v, want an *Error", in, err)
			continue
		}
		if err.Error() != want {
			t.Errorf("Parse(%q):\n got %s\nwant %s", in, err, want)
		}
		if strings.Contains(err.Error(), "target") || strings.Contains(err.Error(), "hedge") {
			t.Errorf("Parse(%q): %s has a caller's prefix", in, err)
		}
	}
}
