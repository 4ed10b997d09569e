package kube

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// countingReader counts the GETs that reach the API.
type countingReader struct {
	client.Reader
	gets atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// 200 vSphere MachineSets, six vCenter steps each: one GET per TTL, not one per step.
func TestVSphereCredentialsReadOncePerTTL(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: VSphereCredentialsNamespace, Name: VSphereCredentialsSecret},
		Data: map[string][]byte{"vc.example.com.username": []byte("admin"), "vc.example.com.password": []byte("secret")}}
	reader := &countingReader{Reader: fake.NewClientBuilder().WithObjects(secret).Build()}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	creds := vsphereCredentials(reader, clk)
	for range 200 * 6 {
		got, err := creds(context.Background(), "vc.example.com")
		if err != nil || got.Username != "admin" {
			t.Fatalf("credentials: %+v, %v", got, err)
		}
	}
	if n := reader.gets.Load(); n != 1 {
		t.Fatalf("%d GETs of the Secret for 1200 steps, want 1", n)
	}
	clk.SetTime(clk.Now().Add(VSphereCredentialsTTL))
	if _, err := creds(context.Background(), "vc.example.com"); err != nil {
		t.Fatal(err)
	}
	if n := reader.gets.Load(); n != 2 {
		t.Fatalf("%d GETs after the TTL, want 2: a changed Secret must be seen", n)
	}
}
