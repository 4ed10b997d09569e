package fakecloud

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
)

// ComputeImage is an image the fake compute API knows; Deprecation "" means active.
type ComputeImage struct {
	Project, Name, Deprecation string
}

// Compute answers the GCP compute REST API's images.get.
type Compute struct {
	*httptest.Server
	Calls atomic.Int64
	// Unavailable, while true, answers every request with HTTP 503 backendError, as the compute
	// API does when it fails. Its errors carry no request id in the body; nothing to vary.
	Unavailable atomic.Bool
	images      []ComputeImage
}

// NewCompute starts a compute endpoint serving images. Close it when done.
func NewCompute(images []ComputeImage) *Compute {
	c := &Compute{images: images}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	return c
}

func (c *Compute) serve(w http.ResponseWriter, r *http.Request) {
	c.Calls.Add(1)
	if c.Unavailable.Load() {
		writeJSON(w, http.StatusServiceUnavailable, googleError(http.StatusServiceUnavailable, "backendError", "Backend Error"))
		return
	}
	// GET /compute/v1/projects/{project}/global/images/{image}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet || len(parts) != 7 || parts[0] != "compute" || parts[2] != "projects" || parts[4] != "global" || parts[5] != "images" {
		writeJSON(w, http.StatusNotFound, googleError(http.StatusNotFound, "notFound", "unknown method "+r.URL.Path))
		return
	}
	project, name := parts[3], parts[6]
	for _, img := range c.images {
		if img.Project != project || img.Name != name {
			continue
		}
		body := map[string]any{
			"kind": "compute#image", "id": "1234567890", "name": img.Name, "status": "READY",
			"selfLink": fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/global/images/%s", project, name),
		}
		if img.Deprecation != "" {
			body["deprecated"] = map[string]any{"state": img.Deprecation}
		}
		writeJSON(w, http.StatusOK, body)
		return
	}
	writeJSON(w, http.StatusNotFound, googleError(http.StatusNotFound, "notFound", fmt.Sprintf("The resource 'projects/%s/global/images/%s' was not found", project, name)))
}

func googleError(code int, reason, message string) map[string]any {
	return map[string]any{"error": map[string]any{
		"code": code, "message": message,
		"errors": []map[string]any{{"message": message, "domain": "global", "reason": reason}},
	}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
