// Package fakecloud serves the cloud APIs the operator calls, on local ports, speaking their real
// wire protocols so the real SDKs can be tested against them.
package fakecloud

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
)

// EC2 answers the EC2 Query API's DescribeImages from a fixed list of AMIs, as EC2 does: by image
// id, by owner (an account or the alias aws-marketplace) and by name pattern.
type EC2 struct {
	*httptest.Server
	// Calls counts DescribeImages requests.
	Calls atomic.Int64
	// Unavailable, while true, answers every request with HTTP 503 Unavailable, as EC2 does when
	// it is failing.
	Unavailable atomic.Bool
	// Throttled, while true, answers every request with HTTP 503 RequestLimitExceeded, as EC2
	// does when it throttles an account.
	Throttled atomic.Bool
	// Gate, when set before requests arrive, holds each request until it is closed, as a slow
	// endpoint does.
	Gate chan struct{}
	amis []aws.Image

	mu       sync.Mutex
	requests []DescribeImagesRequest
	byRegion map[string]int
}

// DescribeImagesRequest is one DescribeImages request as the server received it.
type DescribeImagesRequest struct {
	// Region and AccessKeyID are those of the request's SigV4 signature.
	Region, AccessKeyID string
	// SessionToken is the X-Amz-Security-Token header, set with temporary (STS) credentials.
	SessionToken string
	ImageIDs     []string
	Owners       []string
	NameFilters  []string
}

// ownerAliases are the owner aliases EC2 accepts in DescribeImages, by the account they stand for.
var ownerAliases = map[string]string{"aws-marketplace": aws.MarketplaceOwner}

// Requests returns the DescribeImages requests received so far.
func (e *EC2) Requests() []DescribeImagesRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.requests)
}

// NewEC2 starts an HTTPS EC2 endpoint serving amis (OpenShift accepts only https endpoints);
// trust it with Client() or CertificatePEM. Close it when done.
func NewEC2(amis []aws.Image) *EC2 {
	e := &EC2{amis: amis}
	e.Server = httptest.NewTLSServer(http.HandlerFunc(e.serve))
	return e
}

// CertificatePEM returns the server's self-signed certificate, for SSL_CERT_FILE.
func (e *EC2) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.Certificate().Raw})
}

type ec2Image struct {
	ImageID      string `xml:"imageId"`
	ImageState   string `xml:"imageState"`
	OwnerID      string `xml:"imageOwnerId"`
	OwnerAlias   string `xml:"imageOwnerAlias,omitempty"`
	Name         string `xml:"name"`
	Description  string `xml:"description"`
	CreationDate string `xml:"creationDate"`
}

type describeImagesResponse struct {
	XMLName   xml.Name   `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeImagesResponse"`
	RequestID string     `xml:"requestId"`
	Images    []ec2Image `xml:"imagesSet>item"`
}

type ec2ErrorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}

// CallsIn returns how many DescribeImages requests were signed for region, failed ones included.
func (e *EC2) CallsIn(region string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byRegion[region]
}

func (e *EC2) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "DescribeImages" {
		writeXML(w, http.StatusBadRequest, ec2ErrorResponse{Code: "InvalidAction", Message: "only DescribeImages is served", RequestID: RequestID()})
		return
	}
	e.mu.Lock()
	if e.byRegion == nil {
		e.byRegion = map[string]int{}
	}
	e.byRegion[credentialScope(r, 2)]++
	e.mu.Unlock()
	if e.Gate != nil {
		<-e.Gate
	}
	// Every answer carries a new request id, as EC2's do: nothing may key on it.
	switch {
	case e.Throttled.Load():
		writeXML(w, http.StatusServiceUnavailable, ec2ErrorResponse{Code: "RequestLimitExceeded", Message: "Request limit exceeded.", RequestID: RequestID()})
		return
	case e.Unavailable.Load():
		writeXML(w, http.StatusServiceUnavailable, ec2ErrorResponse{Code: "Unavailable", Message: "The service is unavailable. Please try again shortly.", RequestID: RequestID()})
		return
	}
	e.Calls.Add(1)
	req := DescribeImagesRequest{Region: credentialScope(r, 2), AccessKeyID: credentialScope(r, 0), SessionToken: r.Header.Get("X-Amz-Security-Token"),
		ImageIDs: formList(r, "ImageId"), Owners: formList(r, "Owner")}
	for i := 1; r.Form.Has(fmt.Sprintf("Filter.%d.Name", i)); i++ {
		if r.Form.Get(fmt.Sprintf("Filter.%d.Name", i)) == "name" {
			req.NameFilters = append(req.NameFilters, formList(r, fmt.Sprintf("Filter.%d.Value", i))...)
		}
	}
	e.mu.Lock()
	e.requests = append(e.requests, req)
	e.mu.Unlock()
	resp := describeImagesResponse{RequestID: RequestID()}
	for _, img := range e.amis {
		alias := ""
		for a, account := range ownerAliases {
			if account == img.OwnerID {
				alias = a
			}
		}
		ownerMatches := len(req.Owners) == 0 || slices.Contains(req.Owners, img.OwnerID) || (alias != "" && slices.Contains(req.Owners, alias))
		if img.Region != req.Region || (len(req.ImageIDs) > 0 && !slices.Contains(req.ImageIDs, img.ImageID)) || !ownerMatches || !matchesAny(req.NameFilters, img.Name) {
			continue
		}
		resp.Images = append(resp.Images, ec2Image{ImageID: img.ImageID, ImageState: img.State, OwnerID: img.OwnerID, OwnerAlias: alias, Name: img.Name, Description: img.Description, CreationDate: img.CreationDate})
	}
	// EC2 fails a lookup by id of an AMI it does not know, rather than answering with none.
	if len(req.ImageIDs) > 0 && len(resp.Images) < len(req.ImageIDs) {
		writeXML(w, http.StatusBadRequest, ec2ErrorResponse{Code: "InvalidAMIID.NotFound", Message: fmt.Sprintf("The image id '%v' does not exist", req.ImageIDs), RequestID: RequestID()})
		return
	}
	writeXML(w, http.StatusOK, resp)
}

// credentialScope returns part i of the request's SigV4 credential
// (access key id/date/region/service/aws4_request).
func credentialScope(r *http.Request, i int) string {
	auth := r.Header.Get("Authorization")
	if at := strings.Index(auth, "Credential="); at >= 0 {
		cred, _, _ := strings.Cut(auth[at+len("Credential="):], ",")
		if parts := strings.Split(cred, "/"); len(parts) > i {
			return parts[i]
		}
	}
	return ""
}

func formList(r *http.Request, prefix string) []string {
	var out []string
	for i := 1; r.Form.Has(fmt.Sprintf("%s.%d", prefix, i)); i++ {
		out = append(out, r.Form.Get(fmt.Sprintf("%s.%d", prefix, i)))
	}
	return out
}

func matchesAny(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func writeXML(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(v)
}

// RequestID returns a new random request id in AWS's format (a UUID).
func RequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// RootCAs returns a pool trusting the server.
func (e *EC2) RootCAs() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(e.Certificate())
	return pool
}
