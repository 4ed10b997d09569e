package manifests_test

import (
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// credentialsRequest is what a shipped cloudcredential.openshift.io/v1 CredentialsRequest may hold
// (openshift/cloud-credential-operator's pkg/apis/cloudcredential/v1, whose module the Go module
// proxy does not serve), decoded strictly like every shipped object: an unknown field fails.
type credentialsRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ServiceAccountNames []string               `json:"serviceAccountNames"`
		SecretRef           corev1.ObjectReference `json:"secretRef"`
		ProviderSpec        struct {
			metav1.TypeMeta  `json:",inline"`
			StatementEntries []struct {
				Effect          string                    `json:"effect"`
				Action          []string                  `json:"action"`
				Resource        string                    `json:"resource"`
				PolicyCondition map[string]map[string]any `json:"policyCondition,omitempty"`
			} `json:"statementEntries"`
		} `json:"providerSpec"`
	} `json:"spec"`
}

func (c *credentialsRequest) DeepCopyObject() runtime.Object {
	out := &credentialsRequest{}
	data, _ := json.Marshal(c)
	_ = json.Unmarshal(data, out)
	return out
}

func init() {
	clientgoscheme.Scheme.AddKnownTypeWithName(schema.GroupVersionKind{Group: "cloudcredential.openshift.io", Version: "v1", Kind: "CredentialsRequest"}, &credentialsRequest{})
}

// TestCredentialsRequest checks that the operator's CredentialsRequest grants exactly the actions
// an AMI copy needs (aws.CopyActions) into the Secret the operator reads, under the name its
// messages give.
func TestCredentialsRequest(t *testing.T) {
	objs := objectsIn(t, manifests.CredentialsFile)
	if len(objs) != 1 {
		t.Fatalf("%s: want one CredentialsRequest, have %d objects", manifests.CredentialsFile, len(objs))
	}
	cr, ok := objs[0].(*credentialsRequest)
	if !ok {
		t.Fatalf("%s holds a %T", manifests.CredentialsFile, objs[0])
	}
	if got := cr.Namespace + "/" + cr.Name; got != aws.CredentialsRequest {
		t.Errorf("CredentialsRequest %s, messages name %s", got, aws.CredentialsRequest)
	}
	if ref := cr.Spec.SecretRef; ref.Namespace != "openshift-machine-api" || ref.Name != aws.CopyCredentialsSecret {
		t.Errorf("Secret %s/%s, the operator reads openshift-machine-api/%s", ref.Namespace, ref.Name, aws.CopyCredentialsSecret)
	}
	var granted []string
	for _, e := range cr.Spec.ProviderSpec.StatementEntries {
		if e.Effect != "Allow" || e.Resource != "*" {
			t.Errorf("statement %v: want Allow on *", e.Action)
		}
		granted = append(granted, e.Action...)
	}
	slices.Sort(granted)
	want := slices.Sorted(slices.Values(aws.CopyActions))
	if !slices.Equal(granted, want) {
		t.Errorf("granted %v, an AMI copy needs exactly %v", granted, want)
	}
	if !slices.Contains(cr.Spec.ServiceAccountNames, "bootimage-operator") || !slices.Contains(cr.Spec.ServiceAccountNames, "machine-config-controller") {
		t.Errorf("serviceAccountNames %v: the operator's and the machine-config-controller's (embedded) are both needed for STS", cr.Spec.ServiceAccountNames)
	}
}
