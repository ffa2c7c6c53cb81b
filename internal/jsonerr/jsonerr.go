// Package jsonerr writes the short JSON error answers that Tailgate's HTTP
// components (the gateway, tied.Server, deadline's middleware) send:
// {"error":"..."} with a JSON content type that browsers must not sniff.
package jsonerr

import (
	"encoding/json"
	"net/http"
)

// Write answers with code and {"error": msg}, and returns the length of
// the body (for an access log). Headers the caller set before
// (Retry-After, Allow) go with it.
func Write(w http.ResponseWriter, code int, msg string) int {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	b = append(b, '\n')
	w.Write(b)
	return len(b)
}
