package bootimage

import (
	configv1 "github.com/openshift/api/config/v1"
)

// CurrentImage returns the boot image obj names on platform (its Machine API providerSpec, or its
// Cluster API template's spec, read by its TemplateKind), in the form of Decision.Current; "" when
// it cannot be read. Decisions taken before the image is read (not selected, owned by another
// controller, ...) leave Current empty: this says which image such an object keeps.
func CurrentImage(platform configv1.PlatformType, obj Object) string {
	p, ok := platforms[platform]
	spec, err := parseProviderSpec(obj.ProviderSpec)
	if !ok || err != nil {
		return ""
	}
	return p.Current(MachineSpec{TemplateKind: obj.TemplateKind, fields: spec})
}
