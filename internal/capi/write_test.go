package capi_test

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bootimage-operator/bootimage-operator/internal/capi"
)

var (
	machineSets    = schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machinesets"}
	machineSetKind = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "MachineSet"}
)

func TestDeniedByPolicy(t *testing.T) {
	// As the API server words a ValidatingAdmissionPolicy's refusal: 422 Invalid.
	said := "machinesets.cluster.x-k8s.io \"p-1a\" is forbidden: ValidatingAdmissionPolicy 'deny-p' with binding 'deny-p' denied request: not supported"
	policy := apierrors.NewInvalid(machineSetKind, "p-1a", nil)
	policy.ErrStatus.Message = said
	for name, c := range map[string]struct {
		err  error
		want string
	}{
		"a policy's 422":       {policy, said},
		"wrapped":              {errors.Join(errors.New("patching"), policy), said},
		"RBAC's 403":           {apierrors.NewForbidden(machineSets, "p-1a", errors.New("no rule")), ""},
		"a schema's 422":       {apierrors.NewInvalid(machineSetKind, "p-1a", field.ErrorList{field.Required(field.NewPath("spec"), "")}), ""},
		"the patch's own test": {apierrors.NewInvalid(machineSetKind, "p-1a", field.ErrorList{field.Invalid(field.NewPath("spec"), "", "testing value /spec failed")}), ""},
		"no error":             {nil, ""},
		"a conflict":           {apierrors.NewConflict(machineSets, "p-1a", errors.New("changed")), ""},
	} {
		if got := capi.DeniedByPolicy(c.err); got != c.want {
			t.Errorf("%s: DeniedByPolicy = %q, want %q", name, got, c.want)
		}
	}
}

func TestOwnerMoved(t *testing.T) {
	test := apierrors.NewInvalid(machineSetKind, "w-1a", field.ErrorList{field.Invalid(field.NewPath("spec"), "", "the server rejected our request due to an error in our request: testing value /spec/template/spec/infrastructureRef/name failed")})
	for name, c := range map[string]struct {
		err  error
		want bool
	}{
		"version conflict":   {apierrors.NewConflict(machineSets, "w-1a", errors.New("changed")), true},
		"reference moved":    {test, true},
		"a policy's refusal": {apierrors.NewInvalid(machineSetKind, "w-1a", nil), false},
		"RBAC":               {apierrors.NewForbidden(machineSets, "w-1a", errors.New("no rule")), false},
	} {
		if got := capi.OwnerMoved(c.err); got != c.want {
			t.Errorf("%s: OwnerMoved = %v, want %v", name, got, c.want)
		}
	}
}
