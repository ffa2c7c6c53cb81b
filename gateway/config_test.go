package gateway

import (
	"errors"
	"strings"
	"testing"
)

// A backend New cannot use is refused with one prefix and a message that
// says what is wrong: not Go's url.Parse wording, not a port that only
// fails at the first dial, not the hedge package's prefix under the
// gateway's.
func TestNewBackendErrors(t *testing.T) {
	for b, want := range map[string]string{
		"127.0.0.1:8081":         `gateway: invalid configuration: backend "127.0.0.1:8081": URLs need http:// or https://, such as http://127.0.0.1:8081`,
		"localhost:8081":         `gateway: invalid configuration: backend "localhost:8081": URLs need http:// or https://, such as http://localhost:8081`,
		"http://127.0.0.1:99999": `gateway: invalid configuration: backend "http://127.0.0.1:99999": port 99999 out of range: want 1 to 65535`,
		"http://127.0.0.1:0":     `gateway: invalid configuration: backend "http://127.0.0.1:0": port 0 out of range: want 1 to 65535`,
		"ftp://127.0.0.1:1":      `gateway: invalid configuration: backend "ftp://127.0.0.1:1": scheme must be http or https`,
	} {
		_, err := New(Config{Backends: []string{"http://127.0.0.1:1", b}})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("%q: %v", b, err)
		}
		if err.Error() != want {
			t.Errorf("%q:\n got %s\nwant %s", b, err, want)
		}
		if strings.Contains(err.Error(), "hedge:") || strings.Contains(err.Error(), "first path segment") {
			t.Errorf("%q: %s", b, err)
		}
	}
	for _, b := range []string{"http://127.0.0.1:65535", "http://127.0.0.1:1", "https://127.0.0.1"} {
		if _, err := New(Config{Backends: []string{b}}); err != nil {
			t.Errorf("%q refused: %v", b, err)
		}
	}
}
