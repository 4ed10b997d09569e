package steps

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/inputs"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
)

// Annotations left on a user-data Secret whose stub was upgraded to Ignition spec 3.
const (
	UserDataUpgradedFromAnnotation = "bootimage.openshift.io/user-data-upgraded-from"
	UserDataUpgradedAtAnnotation   = "bootimage.openshift.io/user-data-upgraded-at"
)

// userData reads the user-data Secret named by providerSpec; nil when the providerSpec names none.
func userData(ctx context.Context, c client.Client, providerSpec []byte) (*bootimage.UserData, error) {
	return inputs.Loader{Reader: c, Complete: true}.UserData(ctx, providerSpec)
}

// upgradeUserData writes d's upgraded stub into the Secret, recording the version it had and when.
// The patch carries the resourceVersion of read, the Secret the stub was computed from: a Secret
// changed since is a conflict, and the object is decided again.
func upgradeUserData(ctx context.Context, c client.Client, recorder record.EventRecorder, now time.Time, namespace string, read *bootimage.UserData, d bootimage.Decision) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: read.SecretName}}
	name := read.SecretName
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": read.ResourceVersion,
			"annotations": map[string]string{
				UserDataUpgradedFromAnnotation: d.UserDataVersion,
				UserDataUpgradedAtAnnotation:   now.UTC().Format(time.RFC3339),
			},
		},
		"data": map[string]string{"userData": base64.StdEncoding.EncodeToString(d.UserData)},
	})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, secret, client.RawPatch(types.MergePatchType, patch)); err != nil {
		rule := status.Rule{Verb: "patch", Resource: "secrets", Namespace: namespace}
		return fmt.Errorf("upgrading user-data Secret %s/%s: %w", namespace, name, status.Forbidden(err, rule))
	}
	logf.FromContext(ctx).Info("Upgraded user-data stub", "secret", namespace+"/"+name, "from", d.UserDataVersion, "to", bootimage.UserDataStubVersion)
	recorder.Eventf(secret, corev1.EventTypeNormal, ReasonUserDataUpgraded, "Upgraded the user-data stub from Ignition %s to %s for the new boot image", d.UserDataVersion, bootimage.UserDataStubVersion)
	return nil
}
