package bootimage

import (
	configv1 "github.com/openshift/api/config/v1"
)

// CurrentImage returns the boot image providerSpec names on platform, in the form of
// Decision.Current; "" when it cannot be read. Decisions taken before the image is read (not
// selected, owned by another controller, ...) leave Current empty: this says which image such an
// object keeps.
func CurrentImage(platform configv1.PlatformType, providerSpec []byte) string {
	return currentImageOf(platform, Object{ProviderSpec: providerSpec})
}

// currentImageOf is CurrentImage for any object: a Machine API providerSpec or a Cluster API
// template's spec.template.spec.
func currentImageOf(platform configv1.PlatformType, obj Object) string {
	p, ok := platforms[platform]
	spec, err := parseProviderSpec(obj.ProviderSpec)
	if !ok || err != nil {
		return ""
	}
	return p.Current(MachineSpec{TemplateKind: obj.TemplateKind, fields: spec})
}
