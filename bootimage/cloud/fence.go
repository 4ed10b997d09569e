package cloud

import "context"

// WriteFence keeps the cloud writes of a leader-elected process from going out once it may no
// longer lead (leader.Fence is one): Context bounds a call by the time the fence closes, Send
// refuses a request past it, Bind cancels a long transfer when it closes. The adapters find it in
// the context (WithWriteFence); without one nothing is fenced.
type WriteFence interface {
	Context(context.Context) (context.Context, context.CancelFunc, error)
	Send(context.Context) error
	Bind(context.Context) (context.Context, context.CancelFunc)
}

type writeFenceKey struct{}

// WithWriteFence returns ctx carrying f for the cloud adapters' writes.
func WithWriteFence(ctx context.Context, f WriteFence) context.Context {
	return context.WithValue(ctx, writeFenceKey{}, f)
}

// writeFence is the fence ctx carries, one that fences nothing when it carries none.
func Fence(ctx context.Context) WriteFence {
	if f, ok := ctx.Value(writeFenceKey{}).(WriteFence); ok && f != nil {
		return f
	}
	return noFence{}
}

type noFence struct{}

func (noFence) Context(ctx context.Context) (context.Context, context.CancelFunc, error) {
	return ctx, func() {}, nil
}
func (noFence) Send(context.Context) error { return nil }
func (noFence) Bind(ctx context.Context) (context.Context, context.CancelFunc) {
	return ctx, func() {}
}
