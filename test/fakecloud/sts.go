package fakecloud

import (
	"crypto/x509"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// STS answers the STS Query API's AssumeRoleWithWebIdentity for one role and one web identity
// token, issuing temporary credentials, as the STS of an OIDC-federated (STS) cluster does.
type STS struct {
	*httptest.Server
	// Calls counts AssumeRoleWithWebIdentity requests.
	Calls atomic.Int64
	// AccessKeyID and SessionToken are those of the credentials it issues.
	AccessKeyID, SessionToken string
	roleARN, token            string
}

// NewSTS starts an HTTPS STS endpoint that lets the holder of token assume roleARN. Close it when done.
func NewSTS(roleARN, token string) *STS {
	s := &STS{roleARN: roleARN, token: token, AccessKeyID: "ASIAFAKESTSEXAMPLE01", SessionToken: "FwoGZXIvYXdzEFakeSessionToken"}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	return s
}

// RootCAs returns a pool trusting the server.
func (s *STS) RootCAs() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return pool
}

type stsCredentials struct {
	AccessKeyID     string `xml:"AccessKeyId"`
	SecretAccessKey string `xml:"SecretAccessKey"`
	SessionToken    string `xml:"SessionToken"`
	Expiration      string `xml:"Expiration"`
}

type assumeRoleWithWebIdentityResponse struct {
	XMLName     xml.Name       `xml:"https://sts.amazonaws.com/doc/2011-06-15/ AssumeRoleWithWebIdentityResponse"`
	Subject     string         `xml:"AssumeRoleWithWebIdentityResult>SubjectFromWebIdentityToken"`
	Audience    string         `xml:"AssumeRoleWithWebIdentityResult>Audience"`
	RoleARN     string         `xml:"AssumeRoleWithWebIdentityResult>AssumedRoleUser>Arn"`
	RoleID      string         `xml:"AssumeRoleWithWebIdentityResult>AssumedRoleUser>AssumedRoleId"`
	Credentials stsCredentials `xml:"AssumeRoleWithWebIdentityResult>Credentials"`
	Provider    string         `xml:"AssumeRoleWithWebIdentityResult>Provider"`
	RequestID   string         `xml:"ResponseMetadata>RequestId"`
}

type stsErrorResponse struct {
	XMLName   xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ ErrorResponse"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

func (s *STS) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" || r.Form.Get("Version") != "2011-06-15" {
		writeXML(w, http.StatusBadRequest, stsErrorResponse{Type: "Sender", Code: "InvalidAction", Message: "only AssumeRoleWithWebIdentity (2011-06-15) is served", RequestID: RequestID()})
		return
	}
	s.Calls.Add(1)
	if r.Form.Get("WebIdentityToken") != s.token {
		writeXML(w, http.StatusBadRequest, stsErrorResponse{Type: "Sender", Code: "InvalidIdentityToken", Message: "Couldn't retrieve verification key from your identity provider", RequestID: RequestID()})
		return
	}
	if r.Form.Get("RoleArn") != s.roleARN {
		writeXML(w, http.StatusForbidden, stsErrorResponse{Type: "Sender", Code: "AccessDenied", Message: "Not authorized to perform sts:AssumeRoleWithWebIdentity", RequestID: RequestID()})
		return
	}
	session := r.Form.Get("RoleSessionName")
	writeXML(w, http.StatusOK, assumeRoleWithWebIdentityResponse{
		Subject: "system:serviceaccount:openshift-machine-config-operator:bootimage-operator", Audience: "openshift",
		RoleARN: fmt.Sprintf("%s/%s", s.roleARN, session), RoleID: "AROAFAKEROLEEXAMPLE:" + session,
		Credentials: stsCredentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: "fakeSecretAccessKeyFromSTS", SessionToken: s.SessionToken,
			Expiration: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		Provider: "arn:aws:iam::123456789012:oidc-provider/oidc.example.com", RequestID: RequestID(),
	})
}

// TB is the part of testing.TB (and GinkgoT()) that PodFilesystem needs.
type TB interface {
	TempDir() string
	Setenv(key, value string)
}

// PodFilesystem lays out what an AWS STS cluster's pod has: token written where its projected
// service account token would be, returning that file's path, and a TMPDIR nobody can write to,
// as on a read-only root (it sits below a regular file, so not even root can create it).
func PodFilesystem(t TB, token string) (tokenFile string, err error) {
	dir := t.TempDir()
	tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return "", err
	}
	notADir := filepath.Join(dir, "file")
	if err := os.WriteFile(notADir, nil, 0o400); err != nil {
		return "", err
	}
	t.Setenv("TMPDIR", filepath.Join(notADir, "tmp"))
	if f, err := os.CreateTemp("", "probe-*"); err == nil {
		f.Close()
		return "", fmt.Errorf("TMPDIR %s is writable", os.Getenv("TMPDIR"))
	}
	return tokenFile, nil
}
