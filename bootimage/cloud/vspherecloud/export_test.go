package vspherecloud

import "github.com/vmware/govmomi/vim25/soap"

// WrapSOAP wraps the SOAP transport of v's new sessions inside the fence, as a network would sit.
func WrapSOAP(v *VCenters, wrap func(soap.RoundTripper) soap.RoundTripper) { v.wrapSOAP = wrap }
