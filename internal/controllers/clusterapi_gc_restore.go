package controllers

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// restoreUse is what owner still needs besides the template it names: the template a restore of
// its pending change points it back at (bootimage.RestoreTemplate), which the collector keeps
// until the change is verified, failed or replaced.
func restoreUse(owner *unstructured.Unstructured) []bootimage.TemplateRef {
	name := bootimage.RestoreTemplate(owner.GetAnnotations())
	if name == "" {
		return nil
	}
	return []bootimage.TemplateRef{{Name: name}}
}
