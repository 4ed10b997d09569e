// Package fakecloud serves the cloud APIs the operator calls, on local ports, speaking their real
// wire protocols so the real SDKs can be tested against them.
package fakecloud

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
)

// EC2 answers the EC2 Query API's DescribeImages, as EC2 does: by image id, by owner (an account,
// self or the alias aws-marketplace), by name pattern and by tag; and CopyImage, whose copies
// belong to SelfAccount and stay pending until CompleteCopies or FailCopies.
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
	// CopyRefusal, when set to an EC2 error code, refuses every CopyImage with it (HTTP 400;
	// UnauthorizedOperation is 403, as EC2 answers it).
	CopyRefusal atomic.Value
	// CopyCalls counts CopyImage requests, refused ones included.
	CopyCalls atomic.Int64
	// CopyTime, when set before requests arrive, makes each copy available that long after it
	// began, as EC2 ends a copy; else copies stay pending until CompleteCopies or FailCopies.
	CopyTime time.Duration

	amis     []aws.Image
	copies   []CopyImageRequest
	tokens   map[string]string
	nextCopy int

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
	// TagFilters are the tag:<key> filters, by key.
	TagFilters map[string][]string
}

// SelfAccount is the account of the fake's credentials: its copies' owner, and what owner self
// stands for.
const SelfAccount = "123456789012"

// CopyImageRequest is one CopyImage request as the server received it.
type CopyImageRequest struct {
	// Region and AccessKeyID are those of the request's signature: where the copy is made, and
	// with which credentials.
	Region, AccessKeyID                            string
	SourceRegion, SourceImageID, Name, ClientToken string
	Encrypted                                      bool
	KMSKeyID                                       string
	// Tags are the tags of each resource type (image, snapshot) the request asks for.
	Tags map[string]map[string]string
	// ImageID is the copy's id.
	ImageID string
}

// CopyRequests returns the CopyImage requests that made or found a copy.
func (e *EC2) CopyRequests() []CopyImageRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.copies)
}

// Images returns every image the server knows, copies included.
func (e *EC2) Images() []aws.Image {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.amis)
}

// CompleteCopies makes every pending copy available.
func (e *EC2) CompleteCopies() { e.endCopies("available", "") }

// FailCopies makes every pending copy failed, with reason.
func (e *EC2) FailCopies(reason string) { e.endCopies("failed", reason) }

// AddImages adds images, as another account or the installer makes them.
func (e *EC2) AddImages(images ...aws.Image) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.amis = append(e.amis, images...)
}

func (e *EC2) endCopies(state, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.amis {
		if e.amis[i].State == "pending" && e.amis[i].OwnerID == SelfAccount {
			e.amis[i].State, e.amis[i].StateReason = state, reason
		}
	}
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
	ImageID      string          `xml:"imageId"`
	ImageState   string          `xml:"imageState"`
	OwnerID      string          `xml:"imageOwnerId"`
	OwnerAlias   string          `xml:"imageOwnerAlias,omitempty"`
	Name         string          `xml:"name"`
	Description  string          `xml:"description"`
	CreationDate string          `xml:"creationDate"`
	Tags         []ec2Tag        `xml:"tagSet>item"`
	StateReason  *ec2StateReason `xml:"stateReason"`
}

type ec2Tag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type ec2StateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type copyImageResponse struct {
	XMLName   xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ CopyImageResponse"`
	RequestID string   `xml:"requestId"`
	ImageID   string   `xml:"imageId"`
}

// copyImage makes a pending copy, or answers a repeated client token with the first copy, as EC2
// does. The source must exist in SourceRegion.
func (e *EC2) copyImage(w http.ResponseWriter, r *http.Request) {
	e.CopyCalls.Add(1)
	if code, _ := e.CopyRefusal.Load().(string); code != "" {
		status := http.StatusBadRequest
		if code == "UnauthorizedOperation" {
			status = http.StatusForbidden
		}
		writeXML(w, status, ec2ErrorResponse{Code: code, Message: "You are not authorized to perform this operation.", RequestID: RequestID()})
		return
	}
	req := CopyImageRequest{
		Region: credentialScope(r, 2), AccessKeyID: credentialScope(r, 0), SourceRegion: r.Form.Get("SourceRegion"), SourceImageID: r.Form.Get("SourceImageId"),
		Name: r.Form.Get("Name"), ClientToken: r.Form.Get("ClientToken"), Encrypted: r.Form.Get("Encrypted") == "true",
		KMSKeyID: r.Form.Get("KmsKeyId"), Tags: map[string]map[string]string{},
	}
	for i := 1; r.Form.Has(fmt.Sprintf("TagSpecification.%d.ResourceType", i)); i++ {
		tags := map[string]string{}
		for j := 1; r.Form.Has(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j)); j++ {
			tags[r.Form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j))] = r.Form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Value", i, j))
		}
		req.Tags[r.Form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i))] = tags
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if id, ok := e.tokens[req.ClientToken]; ok && req.ClientToken != "" {
		writeXML(w, http.StatusOK, copyImageResponse{RequestID: RequestID(), ImageID: id})
		return
	}
	found := false
	for _, img := range e.amis {
		found = found || (img.ImageID == req.SourceImageID && img.Region == req.SourceRegion)
	}
	if !found {
		writeXML(w, http.StatusBadRequest, ec2ErrorResponse{Code: "InvalidAMIID.NotFound", Message: fmt.Sprintf("The image id '[%s]' does not exist", req.SourceImageID), RequestID: RequestID()})
		return
	}
	e.nextCopy++
	req.ImageID = fmt.Sprintf("ami-0c0%014d", e.nextCopy)
	if e.tokens == nil {
		e.tokens = map[string]string{}
	}
	e.tokens[req.ClientToken] = req.ImageID
	e.copies = append(e.copies, req)
	e.amis = append(e.amis, aws.Image{ImageID: req.ImageID, OwnerID: SelfAccount, Name: req.Name, Region: req.Region, State: "pending",
		CreationDate: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Tags: req.Tags["image"]})
	writeXML(w, http.StatusOK, copyImageResponse{RequestID: RequestID(), ImageID: req.ImageID})
}

// copiesDone makes the copies older than CopyTime available; e.mu is held.
func (e *EC2) copiesDone() {
	if e.CopyTime == 0 {
		return
	}
	for i, img := range e.amis {
		started, err := time.Parse(time.RFC3339, img.CreationDate)
		if img.State == "pending" && img.OwnerID == SelfAccount && err == nil && time.Since(started) >= e.CopyTime {
			e.amis[i].State = "available"
		}
	}
}

// hasTags reports whether tags holds, for every filter key, one of its values.
func hasTags(tags map[string]string, filters map[string][]string) bool {
	for k, values := range filters {
		v, ok := tags[k]
		if !ok || !slices.Contains(values, v) {
			return false
		}
	}
	return true
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

// AllCalls returns how many requests of any kind were received, failed ones included.
func (e *EC2) AllCalls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.byRegion {
		n += c
	}
	return n
}

func (e *EC2) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || (r.Form.Get("Action") != "DescribeImages" && r.Form.Get("Action") != "CopyImage") {
		writeXML(w, http.StatusBadRequest, ec2ErrorResponse{Code: "InvalidAction", Message: "only DescribeImages and CopyImage are served", RequestID: RequestID()})
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
	if r.Form.Get("Action") == "CopyImage" {
		e.copyImage(w, r)
		return
	}
	e.Calls.Add(1)
	req := DescribeImagesRequest{Region: credentialScope(r, 2), AccessKeyID: credentialScope(r, 0), SessionToken: r.Header.Get("X-Amz-Security-Token"),
		ImageIDs: formList(r, "ImageId"), Owners: formList(r, "Owner")}
	for i := 1; r.Form.Has(fmt.Sprintf("Filter.%d.Name", i)); i++ {
		name, values := r.Form.Get(fmt.Sprintf("Filter.%d.Name", i)), formList(r, fmt.Sprintf("Filter.%d.Value", i))
		switch {
		case name == "name":
			req.NameFilters = append(req.NameFilters, values...)
		case strings.HasPrefix(name, "tag:"):
			if req.TagFilters == nil {
				req.TagFilters = map[string][]string{}
			}
			req.TagFilters[strings.TrimPrefix(name, "tag:")] = values
		}
	}
	e.mu.Lock()
	e.requests = append(e.requests, req)
	e.mu.Unlock()
	resp := describeImagesResponse{RequestID: RequestID()}
	e.mu.Lock()
	e.copiesDone()
	amis := slices.Clone(e.amis)
	e.mu.Unlock()
	for _, img := range amis {
		alias := ""
		for a, account := range ownerAliases {
			if account == img.OwnerID {
				alias = a
			}
		}
		ownerMatches := len(req.Owners) == 0 || slices.Contains(req.Owners, img.OwnerID) || (alias != "" && slices.Contains(req.Owners, alias)) ||
			(img.OwnerID == SelfAccount && slices.Contains(req.Owners, "self"))
		if img.Region != req.Region || (len(req.ImageIDs) > 0 && !slices.Contains(req.ImageIDs, img.ImageID)) || !ownerMatches || !matchesAny(req.NameFilters, img.Name) || !hasTags(img.Tags, req.TagFilters) {
			continue
		}
		out := ec2Image{ImageID: img.ImageID, ImageState: img.State, OwnerID: img.OwnerID, OwnerAlias: alias, Name: img.Name, Description: img.Description, CreationDate: img.CreationDate}
		for _, k := range slices.Sorted(maps.Keys(img.Tags)) {
			out.Tags = append(out.Tags, ec2Tag{Key: k, Value: img.Tags[k]})
		}
		if img.StateReason != "" {
			out.StateReason = &ec2StateReason{Code: "Client.Error", Message: img.StateReason}
		}
		resp.Images = append(resp.Images, out)
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
