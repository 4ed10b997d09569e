package main

import (
	"cmp"
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/internal/capi"
)

// templateRestore checks that change, the newest of the Cluster API owner, can be undone as the
// operator's own restore would (it still names the copy the change moved it to, and the template
// it moved it from exists), and says what undoing it does: the templates and their images.
func templateRestore(ctx context.Context, c client.Client, owner *unstructured.Unstructured, change bootimage.Change, platform configv1.PlatformType) (string, error) {
	ref, err := clusterapi.InfrastructureRef(owner)
	if err != nil {
		return "", err
	}
	if ref.Name != change.Template.To {
		return "", fmt.Errorf("it names template %s, not %s which the newest change moved it to: it was moved since, so undoing the change could undo that too", ref.Name, change.Template.To)
	}
	previous, err := capi.TemplateNamed(ctx, c.RESTMapper(), c, owner, change.Template.From)
	if err != nil {
		return "", err
	}
	if previous == nil {
		return "", fmt.Errorf("template %s %s/%s, which the newest change moved it from, is not found: a restore would point it at nothing", ref.Kind, owner.GetNamespace(), change.Template.From)
	}
	// The owner as the restore leaves it, naming the previous template, for that template's image.
	restored := owner.DeepCopy()
	if err := unstructured.SetNestedField(restored.Object, change.Template.From, "spec", "template", "spec", "infrastructureRef", "name"); err != nil {
		return "", err
	}
	current, err := capi.Template(ctx, c.RESTMapper(), c, owner)
	if err != nil {
		return "", err
	}
	image := func(o, t *unstructured.Unstructured, recorded string) string {
		if t == nil {
			return recorded
		}
		return cmp.Or(bootimage.CurrentImage(platform, clusterapi.ObjectOf(o, t, nil)), recorded)
	}
	return fmt.Sprintf("template %s -> %s, boot image %s -> %s", change.Template.To, change.Template.From,
		image(owner, current, change.To), image(restored, previous, change.From)), nil
}
