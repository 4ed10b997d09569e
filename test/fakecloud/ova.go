package fakecloud

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ovfDescriptor is an RHCOS-shaped OVF: one disk, one network, a product section carrying the
// RHCOS version, and EFI secure boot on as the RHCOS OVA has it.
const ovfDescriptor = `<?xml version="1.0" encoding="UTF-8"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"
  xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData"
  xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData"
  xmlns:vmw="http://www.vmware.com/schema/ovf">
  <References><File ovf:id="file1" ovf:href="disk.vmdk" ovf:size="%d"/></References>
  <DiskSection><Info>Virtual disk information</Info>
    <Disk ovf:diskId="vmdisk1" ovf:fileRef="file1" ovf:capacity="16" ovf:capacityAllocationUnits="byte * 2^20"
      ovf:format="http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"/>
  </DiskSection>
  <NetworkSection><Info>The list of logical networks</Info>
    <Network ovf:name="VM Network"><Description>The VM Network network</Description></Network>
  </NetworkSection>
  <VirtualSystem ovf:id="rhcos">
    <Info>A virtual machine</Info>
    <Name>rhcos</Name>
    <ProductSection><Info>Information about the installed software</Info>
      <Product>Red Hat Enterprise Linux CoreOS</Product><Vendor>Red Hat</Vendor><Version>%s</Version>
    </ProductSection>
    <VirtualHardwareSection><Info>Virtual hardware requirements</Info>
      <System><vssd:ElementName>Virtual Hardware Family</vssd:ElementName><vssd:InstanceID>0</vssd:InstanceID><vssd:VirtualSystemType>vmx-15</vssd:VirtualSystemType></System>
      <Item><rasd:ElementName>2 virtual CPUs</rasd:ElementName><rasd:InstanceID>1</rasd:InstanceID><rasd:ResourceType>3</rasd:ResourceType><rasd:VirtualQuantity>2</rasd:VirtualQuantity></Item>
      <Item><rasd:ElementName>4096MB of memory</rasd:ElementName><rasd:InstanceID>2</rasd:InstanceID><rasd:ResourceType>4</rasd:ResourceType><rasd:VirtualQuantity>4096</rasd:VirtualQuantity></Item>
      <Item><rasd:ElementName>SCSI Controller 0</rasd:ElementName><rasd:InstanceID>3</rasd:InstanceID><rasd:ResourceSubType>VirtualSCSI</rasd:ResourceSubType><rasd:ResourceType>6</rasd:ResourceType></Item>
      <Item><rasd:AddressOnParent>0</rasd:AddressOnParent><rasd:ElementName>Hard Disk 1</rasd:ElementName><rasd:HostResource>ovf:/disk/vmdisk1</rasd:HostResource><rasd:InstanceID>4</rasd:InstanceID><rasd:Parent>3</rasd:Parent><rasd:ResourceType>17</rasd:ResourceType></Item>
      <Item><rasd:AutomaticAllocation>true</rasd:AutomaticAllocation><rasd:Connection>VM Network</rasd:Connection><rasd:ElementName>Network adapter 1</rasd:ElementName><rasd:InstanceID>5</rasd:InstanceID><rasd:ResourceSubType>VmxNet3</rasd:ResourceSubType><rasd:ResourceType>10</rasd:ResourceType></Item>
      <vmw:Config ovf:required="false" vmw:key="firmware" vmw:value="efi"/>
      <vmw:Config ovf:required="false" vmw:key="bootOptions.efiSecureBootEnabled" vmw:value="true"/>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
`

// OVA returns a small valid OVA of RHCOS release: a tar of an OVF descriptor and a tiny disk.
func OVA(release string) []byte {
	disk := bytes.Repeat([]byte("rhcos-disk-"+release), 64)
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"rhcos.ovf", fmt.Appendf(nil, ovfDescriptor, len(disk), release)},
		{"disk.vmdk", disk},
	} {
		if err := w.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			panic(err)
		}
		if _, err := w.Write(f.data); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// SHA256 is the hex SHA-256 of data, as a stream lists it.
func SHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// OVAServer serves OVAs over HTTP, counting downloads. Stall makes it a mirror that stops
// answering in the middle of a download.
type OVAServer struct {
	*httptest.Server
	// Downloads counts GET requests.
	Downloads atomic.Int64
	// Stalled counts downloads that stalled; Abandoned those of them whose client went away.
	Stalled, Abandoned atomic.Int64

	mu       sync.Mutex
	files    map[string][]byte
	stall    chan struct{}
	releases []func()
}

// NewOVAServer serves nothing yet: Put adds files.
func NewOVAServer() *OVAServer {
	s := &OVAServer{files: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Downloads.Add(1)
		s.mu.Lock()
		data, ok := s.files[r.URL.Path]
		stall := s.stall
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if stall != nil {
			// Headers and half the body, then nothing until released or the client gives up.
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			_, _ = w.Write(data[:len(data)/2])
			w.(http.Flusher).Flush()
			s.Stalled.Add(1)
			select {
			case <-stall:
				data = data[len(data)/2:]
			case <-r.Context().Done():
				s.Abandoned.Add(1)
				return
			}
		}
		_, _ = w.Write(data)
	}))
	return s
}

// Stall makes downloads, those under way excepted, stop after half the body until release is
// called (release is idempotent, and Close releases too).
func (s *OVAServer) Stall() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stall := make(chan struct{})
	s.stall = stall
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			if s.stall == stall {
				s.stall = nil
			}
			s.mu.Unlock()
			close(stall)
		})
	}
	s.releases = append(s.releases, release)
	return release
}

// Close releases stalled downloads and stops the server.
func (s *OVAServer) Close() {
	s.mu.Lock()
	releases := s.releases
	s.mu.Unlock()
	for _, release := range releases {
		release()
	}
	s.Server.Close()
}

// Put serves data at path and returns its URL.
func (s *OVAServer) Put(path string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = data
	return s.URL + path
}
