package capireconciler

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
)

// restoreUse is what owner still needs besides the template it names: the template a restore of
// its pending change points it back at (clusterapi.RestoreTemplate), which the collector keeps
// until the change is verified, failed or replaced.
func restoreUse(owner *unstructured.Unstructured) []clusterapi.TemplateRef {
	name := clusterapi.RestoreTemplate(owner.GetAnnotations())
	if name == "" {
		return nil
	}
	return []clusterapi.TemplateRef{{Name: name}}
}
