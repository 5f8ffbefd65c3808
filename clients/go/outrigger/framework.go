package outrigger

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// FrameworkCallTimeout bounds every call the host makes to the framework (and no call outlives the
// request that makes it).
const FrameworkCallTimeout = 5 * time.Second

// MaxMessageBytes is the largest gRPC message the host sends or receives.
const MaxMessageBytes = 64 << 20

// Framework is the client of the framework's Handle and CycleState services, as a plugin reaches them.
type Framework struct {
	// Address is where the framework serves them ("host:port").
	Address string
	// Handle and CycleState are the generated clients (every call carries the host's credential).
	Handle     pb.HandleClient
	CycleState pb.CycleStateClient
	conn       *grpc.ClientConn
	credential atomic.Pointer[string]
}

// bearer sends HandshakeRequest.credential as `authorization: Bearer <credential>` on every call.
type bearer struct{ fw *Framework }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if c := b.fw.credential.Load(); c != nil && *c != "" {
		return map[string]string{"authorization": "Bearer " + *c}, nil
	}
	return nil, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// Dial is a client of the framework at address (the connection is made lazily).
func Dial(address string) (*Framework, error) {
	fw := &Framework{Address: address}
	conn, err := grpc.NewClient(address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer{fw}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	)
	if err != nil {
		return nil, fmt.Errorf("framework address %q: %w", address, err)
	}
	fw.conn = conn
	fw.Handle = pb.NewHandleClient(conn)
	fw.CycleState = pb.NewCycleStateClient(conn)
	return fw, nil
}

// SetCredential sets the credential sent with every call (HandshakeRequest.credential).
func (f *Framework) SetCredential(c string) { f.credential.Store(&c) }

// Close closes the connection.
func (f *Framework) Close() error { return f.conn.Close() }

func (f *Framework) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, FrameworkCallTimeout)
}

// AllowWaitingPod allows a pod waiting in Permit on behalf of plugin; false when it was not waiting.
func (f *Framework) AllowWaitingPod(ctx context.Context, uid, plugin string) (bool, error) {
	ctx, cancel := f.deadline(ctx)
	defer cancel()
	r, err := f.Handle.AllowWaitingPod(ctx, &pb.AllowWaitingPodRequest{Uid: uid, Plugin: plugin})
	if err != nil {
		return false, fmt.Errorf("AllowWaitingPod at the framework (%s): %w", f.Address, err)
	}
	return r.GetFound(), nil
}

// RejectWaitingPod rejects a waiting pod; false when it was not waiting.
func (f *Framework) RejectWaitingPod(ctx context.Context, uid, plugin, message string) (bool, error) {
	ctx, cancel := f.deadline(ctx)
	defer cancel()
	r, err := f.Handle.RejectWaitingPod(ctx, &pb.RejectWaitingPodRequest{Uid: uid, Plugin: plugin, Message: message})
	if err != nil {
		return false, fmt.Errorf("RejectWaitingPod at the framework (%s): %w", f.Address, err)
	}
	return r.GetFound(), nil
}

// ListWaitingPods lists the pods waiting in Permit ("" profile: all).
func (f *Framework) ListWaitingPods(ctx context.Context, profile string) ([]*pb.WaitingPod, error) {
	ctx, cancel := f.deadline(ctx)
	defer cancel()
	r, err := f.Handle.ListWaitingPods(ctx, &pb.ListWaitingPodsRequest{Profile: profile})
	if err != nil {
		return nil, fmt.Errorf("ListWaitingPods at the framework (%s): %w", f.Address, err)
	}
	return r.GetPods(), nil
}

// BindPod binds a pod to a node through the framework.
func (f *Framework) BindPod(ctx context.Context, pod *pb.PodRef, node, plugin string) *Status {
	ctx, cancel := f.deadline(ctx)
	defer cancel()
	r, err := f.Handle.BindPod(ctx, &pb.BindPodRequest{Pod: pod, NodeName: node, Plugin: plugin})
	if err != nil {
		return AsStatus(fmt.Errorf("BindPod at the framework (%s): %w", f.Address, err))
	}
	return StatusFromProto(r.GetStatus())
}
