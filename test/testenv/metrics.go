package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
)

// ServingCert writes a serving certificate for 127.0.0.1 into dir as a serving-cert Secret is
// mounted (tls.crt, tls.key), and returns the CA to trust.
func ServingCert(dir string) ([]byte, error) {
	cert, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, err
	}
	return cert, errors.Join(os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600), os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600))
}

// ServiceAccountToken asks the API server for a token of the ServiceAccount, as a kubelet does
// for a pod that runs as it.
func (e *Env) ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := e.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", err
	}
	return req.Status.Token, nil
}

// Scraped is one answer of a metrics endpoint.
type Scraped struct {
	Status, ProtoMajor int
	Families           map[string]*dto.MetricFamily
}

// Scrape GETs https://addr/metrics as Prometheus does: over TLS verified with ca, with token as
// bearer token when given. An error means no answer (e.g. not listening yet).
func Scrape(addr string, ca []byte, token string) (Scraped, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return Scraped{}, errors.New("no certificate in the CA")
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return Scraped{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return Scraped{}, err
	}
	defer resp.Body.Close()
	got := Scraped{Status: resp.StatusCode, ProtoMajor: resp.ProtoMajor}
	if resp.StatusCode == http.StatusOK {
		parser := expfmt.NewTextParser(model.LegacyValidation)
		got.Families, err = parser.TextToMetricFamilies(resp.Body)
	}
	return got, err
}

// Value returns the value of the series of metric name with exactly the given label name/value
// pairs, or nil when there is none.
func (s Scraped) Value(name string, labelPairs ...string) any {
	want := map[string]string{}
	for i := 0; i+1 < len(labelPairs); i += 2 {
		want[labelPairs[i]] = labelPairs[i+1]
	}
	for _, m := range s.Families[name].GetMetric() {
		if maps.Equal(Labels(m), want) {
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return nil
}

// Labels returns the labels of a series.
func Labels(m *dto.Metric) map[string]string {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	return have
}
