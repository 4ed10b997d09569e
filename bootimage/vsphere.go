package bootimage

import "context"

type vsphere struct{}

// decide reports the vSphere template and the stream's OVA. Updating means importing the OVA
// into vCenter as a new template, which needs vCenter access this operator does not have yet.
func (vsphere) decide(_ context.Context, d Decision, in providerInput) (Decision, error) {
	var template string
	if err := in.spec.field("template", &template); err != nil || template == "" {
		return d.with(Error, ReasonInvalidProviderSpec, "providerSpec: template is missing or not a string"), nil
	}
	d.Current = template
	ova := ""
	if a, ok := in.streams.Default.Architectures[in.arch].Artifacts["vmware"]; ok {
		if f, ok := a.Formats["ova"]; ok && f.Disk != nil {
			ova = f.Disk.Location
		}
	}
	return d.with(Skip, ReasonUnsupportedPlatform, "vSphere template %s: importing the stream's OVA %s into vCenter is not supported by this operator yet", template, ova), nil
}
