// Package fakecloud serves the cloud APIs the operator calls, on local ports, speaking their real
// wire protocols so the real SDKs can be tested against them.
package fakecloud

import (
	"crypto/x509"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync/atomic"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// EC2 answers the EC2 Query API's DescribeImages from a fixed list of AMIs.
type EC2 struct {
	*httptest.Server
	// Calls counts DescribeImages requests.
	Calls atomic.Int64
	// Failing, while true, answers every request with a 500 InternalError, as EC2 does in an outage.
	Failing atomic.Bool
	amis    []bootimage.AWSImage
}

// NewEC2 starts an HTTPS EC2 endpoint serving amis (OpenShift accepts only https endpoints);
// trust it with Client() or CertificatePEM. Close it when done.
func NewEC2(amis []bootimage.AWSImage) *EC2 {
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

func (e *EC2) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "DescribeImages" {
		writeXML(w, http.StatusBadRequest, ec2ErrorResponse{Code: "InvalidAction", Message: "only DescribeImages is served", RequestID: "fake"})
		return
	}
	e.Calls.Add(1)
	if e.Failing.Load() {
		writeXML(w, http.StatusInternalServerError, ec2ErrorResponse{Code: "InternalError", Message: "An internal error has occurred", RequestID: "fake"})
		return
	}
	region := regionOf(r)
	ids, owners := formList(r, "ImageId"), formList(r, "Owner")
	var nameFilters []string
	for i := 1; r.Form.Has(fmt.Sprintf("Filter.%d.Name", i)); i++ {
		if r.Form.Get(fmt.Sprintf("Filter.%d.Name", i)) == "name" {
			nameFilters = append(nameFilters, formList(r, fmt.Sprintf("Filter.%d.Value", i))...)
		}
	}
	resp := describeImagesResponse{RequestID: "fake"}
	for _, img := range e.amis {
		if img.Region != region || (len(ids) > 0 && !contains(ids, img.ImageID)) || (len(owners) > 0 && !contains(owners, img.OwnerID)) || !matchesAny(nameFilters, img.Name) {
			continue
		}
		resp.Images = append(resp.Images, ec2Image{ImageID: img.ImageID, ImageState: img.State, OwnerID: img.OwnerID, Name: img.Name, Description: img.Description, CreationDate: img.CreationDate})
	}
	// EC2 fails a lookup by id of an AMI it does not know, rather than answering with none.
	if len(ids) > 0 && len(resp.Images) < len(ids) {
		writeXML(w, http.StatusBadRequest, ec2ErrorResponse{Code: "InvalidAMIID.NotFound", Message: fmt.Sprintf("The image id '%v' does not exist", ids), RequestID: "fake"})
		return
	}
	writeXML(w, http.StatusOK, resp)
}

// regionOf reads the region from the SigV4 credential scope of the request.
func regionOf(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if i := strings.Index(auth, "Credential="); i >= 0 {
		parts := strings.Split(auth[i+len("Credential="):], "/")
		if len(parts) > 2 {
			return parts[2]
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

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
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

// RootCAs returns a pool trusting the server.
func (e *EC2) RootCAs() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(e.Certificate())
	return pool
}
