package cloud_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/gcpcloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/gcp"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// TestCloudCallsUseClusterProxyAndTrust runs the cloud calls in a child process started with the
// environment the Deployment gives the operator: HTTPS_PROXY/HTTP_PROXY as injected from
// Proxy/cluster, and a trust store holding only the cluster's CA (SSL_CERT_FILE stands in for the
// mounted bundle). A child, because Go reads the proxy environment once per process. The endpoints
// are named example.com so that the loopback exemption of the proxy rules does not apply; only the
// proxy knows where they are.
func TestCloudCallsUseClusterProxyAndTrust(t *testing.T) {
	if os.Getenv("CLOUD_PROXY_CHILD") == "1" {
		cloudCallsFromEnvironment(t)
		return
	}
	ec2 := fakecloud.NewEC2(fixtures.AWSImages())
	defer ec2.Close()
	compute := fakecloud.NewCompute([]fakecloud.ComputeImage{{Project: "rhcos-cloud", Name: fixtures.NewGCPImageName}})
	defer compute.Close()
	proxy := &tunnel{routes: map[string]string{}}
	ec2Host, computeHost := rename(t, ec2.URL, proxy), rename(t, compute.URL, proxy)
	proxyServer := httptest.NewServer(proxy)
	defer proxyServer.Close()
	trust := filepath.Join(t.TempDir(), "tls-ca-bundle.pem")
	if err := os.WriteFile(trust, ec2.CertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^TestCloudCallsUseClusterProxyAndTrust$")
	child.Env = append(os.Environ(), "CLOUD_PROXY_CHILD=1", "HTTPS_PROXY="+proxyServer.URL, "HTTP_PROXY="+proxyServer.URL, "NO_PROXY=",
		"SSL_CERT_FILE="+trust, "SSL_CERT_DIR=", "EC2_URL=https://"+ec2Host, "COMPUTE_URL=http://"+computeHost)
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("cloud calls through the proxy: %v\n%s", err, out)
	}
	t.Logf("proxy saw %q", proxy.seen())
	if got := proxy.seen(); !slices.Contains(got, "CONNECT "+ec2Host) || !slices.Contains(got, "GET "+computeHost) {
		t.Errorf("the proxy saw %q, want a CONNECT to %s and a GET to %s", got, ec2Host, computeHost)
	}
	if ec2.Calls.Load() != 1 || compute.Calls.Load() != 1 {
		t.Errorf("EC2 got %d calls, compute %d; want 1 each", ec2.Calls.Load(), compute.Calls.Load())
	}
}

func cloudCallsFromEnvironment(t *testing.T) {
	ctx := context.Background()
	ec2 := &awscloud.EC2{Metrics: testMetrics, Settings: func(context.Context) (awscloud.Settings, error) {
		return awscloud.Settings{Version: "1", AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", Endpoint: os.Getenv("EC2_URL")}, nil
	}}
	if img, err := ec2.Image(ctx, "us-east-1", fixtures.OldAWSAMI); err != nil || img == nil {
		t.Fatalf("EC2: %v, %v", img, err)
	}
	compute := &gcpcloud.Images{Metrics: testMetrics, Settings: func(context.Context) (gcp.Settings, error) {
		return gcp.Settings{Version: "1", Token: "t", Endpoint: os.Getenv("COMPUTE_URL")}, nil
	}}
	if img, err := compute.Image(ctx, "rhcos-cloud", fixtures.NewGCPImageName); err != nil || img == nil {
		t.Fatalf("compute: %v, %v", img, err)
	}
}

// rename routes example.com:<port of rawURL> to rawURL's listener through p.
func rename(t *testing.T, rawURL string, p *tunnel) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	name := "example.com:" + u.Port()
	p.routes[name] = u.Host
	return name
}

// tunnel is a forward proxy that knows where example.com's ports really are: CONNECT tunnels for
// HTTPS, absolute-form requests for HTTP.
type tunnel struct {
	routes map[string]string
	mu     sync.Mutex
	log    []string
}

func (p *tunnel) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

func (p *tunnel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.log = append(p.log, r.Method+" "+r.Host)
	p.mu.Unlock()
	backend, ok := p.routes[r.Host]
	if !ok {
		http.Error(w, "unknown host "+r.Host, http.StatusBadGateway)
		return
	}
	if r.Method != http.MethodConnect {
		(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Host = backend
			pr.Out.URL.Scheme = strings.TrimSuffix(pr.In.URL.Scheme, "s")
		}}).ServeHTTP(w, r)
		return
	}
	upstream, err := net.Dial("tcp", backend)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusOK)
	client, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	go func() {
		defer upstream.Close()
		_, _ = io.Copy(upstream, client)
	}()
	go func() {
		defer client.Close()
		_, _ = io.Copy(client, upstream)
	}()
}
