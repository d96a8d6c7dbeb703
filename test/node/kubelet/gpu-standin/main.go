// Command gpu-standin is a STAND-IN device plugin for the node fixture (test/node/README.md): it
// advertises N fake `nvidia.com/gpu` devices to the kubelet so that the stack's GPU pods (trainer,
// vLLM) can be scheduled on a node without a GPU. There is no GPU behind it: Allocate only sets
// NVIDIA_VISIBLE_DEVICES to the fake ids (what NVIDIA's plugin sets with its default "envvar"
// device list strategy, NVIDIA/k8s-device-plugin internal/plugin/server.go: deviceListEnvvar,
// apiEnvs) and gives the container no device node, mount or CDI device.
//
// The kubelet device plugin API v1beta1 (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1, api.proto
// and constants.go): the plugin serves the DevicePlugin service on a unix socket in the kubelet's
// device-plugins directory, then calls Registration.Register on kubelet.sock in that directory with
// the socket's file name. A kubelet that starts removes every socket in that directory and makes a
// new kubelet.sock (k8s.io/kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go, Start);
// this program checks every second and serves and registers again when its socket is gone or
// kubelet.sock is another file.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// visibleDevicesEnv is the variable NVIDIA's device plugin sets for the NVIDIA container runtime.
const visibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

type plugin struct {
	api.UnimplementedDevicePluginServer
	ids []string // fake device ids, in order
}

func (p *plugin) known(id string) bool { return slices.Contains(p.ids, id) }

func (p *plugin) GetDevicePluginOptions(context.Context, *api.Empty) (*api.DevicePluginOptions, error) {
	return &api.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch sends the devices once (all Healthy: nothing can fail) and holds the stream open.
func (p *plugin) ListAndWatch(_ *api.Empty, s grpc.ServerStreamingServer[api.ListAndWatchResponse]) error {
	devs := make([]*api.Device, len(p.ids))
	for i, id := range p.ids {
		devs[i] = &api.Device{ID: id, Health: api.Healthy}
	}
	if err := s.Send(&api.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	log.Printf("ListAndWatch: sent %d fake devices to the kubelet", len(devs))
	<-s.Context().Done() // ends when the kubelet goes or the server stops
	return nil
}

// GetPreferredAllocation prefers the required ids, then the lowest free ones.
func (p *plugin) GetPreferredAllocation(_ context.Context, r *api.PreferredAllocationRequest) (*api.PreferredAllocationResponse, error) {
	resp := &api.PreferredAllocationResponse{}
	for _, c := range r.ContainerRequests {
		pick := slices.Clone(c.MustIncludeDeviceIDs)
		for _, id := range p.ids {
			if len(pick) >= int(c.AllocationSize) {
				break
			}
			if slices.Contains(c.AvailableDeviceIDs, id) && !slices.Contains(pick, id) {
				pick = append(pick, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &api.ContainerPreferredAllocationResponse{DeviceIDs: pick})
	}
	return resp, nil
}

// Allocate gives each container NVIDIA_VISIBLE_DEVICES=<its fake ids> and nothing else.
func (p *plugin) Allocate(_ context.Context, r *api.AllocateRequest) (*api.AllocateResponse, error) {
	resp := &api.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !p.known(id) {
				return nil, fmt.Errorf("gpu-standin: unknown fake device %q (advertised: %s)", id, strings.Join(p.ids, ","))
			}
		}
		v := strings.Join(c.DevicesIds, ",")
		log.Printf("Allocate: %s=%s (fake ids, no device nodes)", visibleDevicesEnv, v)
		resp.ContainerResponses = append(resp.ContainerResponses, &api.ContainerAllocateResponse{Envs: map[string]string{visibleDevicesEnv: v}})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *api.PreStartContainerRequest) (*api.PreStartContainerResponse, error) {
	return &api.PreStartContainerResponse{}, nil
}

// serve listens on sock (removing a stale one first) and serves the plugin until Stop.
func serve(p *plugin, sock string) (*grpc.Server, error) {
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	s := grpc.NewServer()
	api.RegisterDevicePluginServer(s, p)
	go func() {
		if err := s.Serve(ln); err != nil {
			log.Printf("serving %s ended: %v", sock, err)
		}
	}()
	return s, nil
}

// register calls Registration.Register on the kubelet's socket.
func register(kubeletSock, endpoint, resource string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = api.NewRegistrationClient(conn).Register(ctx, &api.RegisterRequest{
		Version:      api.Version,
		Endpoint:     endpoint,
		ResourceName: resource,
		Options:      &api.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	return err
}

func main() {
	n := flag.Int("devices", 8, "number of fake devices to advertise")
	resource := flag.String("resource", "nvidia.com/gpu", "extended resource name to advertise")
	dir := flag.String("plugin-dir", api.DevicePluginPath, "the kubelet's device plugin directory (fixed in the kubelet, not under its --root-dir)")
	socketName := flag.String("socket", "gpu-standin.sock", "this plugin's socket file name in --plugin-dir")
	prefix := flag.String("id-prefix", "standin-fake-gpu-", "fake device ids are this prefix + 0..N-1")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `gpu-standin: a STAND-IN kubelet device plugin (API v1beta1) for test nodes WITHOUT a GPU.
It advertises --devices fake devices as --resource, so that pods requesting it can be admitted;
Allocate only sets %s to the fake ids. No device node, no driver, no GPU.

Usage: gpu-standin [flags]
`, visibleDevicesEnv)
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.LUTC)
	log.SetPrefix("[gpu-standin, STAND-IN: no GPU] ")
	if *n < 1 {
		log.Fatalf("--devices must be at least 1, got %d", *n)
	}
	p := &plugin{}
	for i := range *n {
		p.ids = append(p.ids, fmt.Sprintf("%s%d", *prefix, i))
	}
	sock := filepath.Join(*dir, *socketName)
	kubeletSock := filepath.Join(*dir, filepath.Base(api.KubeletSocket))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	var s *grpc.Server
	// pause waits a second; on SIGTERM/SIGINT it stops serving, removes the socket and exits.
	pause := func() {
		select {
		case sg := <-sig:
			log.Printf("%v: stopping", sg)
			if s != nil {
				s.Stop()
			}
			_ = os.Remove(sock)
			os.Exit(0)
		case <-time.After(time.Second):
		}
	}
	for {
		kubelet, err := os.Stat(kubeletSock)
		if err == nil {
			if s, err = serve(p, sock); err != nil {
				log.Fatalf("listening on %s: %v", sock, err)
			}
			err = register(kubeletSock, *socketName, *resource)
		}
		if err != nil {
			log.Printf("registering with %s: %v (again in 1s)", kubeletSock, err)
			if s != nil {
				s.Stop()
				s = nil
			}
			pause()
			continue
		}
		log.Printf("registered %s: %d fake devices (%s..%s), serving %s", *resource, *n, p.ids[0], p.ids[*n-1], sock)
		// A restarted kubelet removes this socket and makes a new kubelet.sock.
		for {
			pause()
			_, ownErr := os.Stat(sock)
			fi, err := os.Stat(kubeletSock)
			if ownErr != nil || err != nil || !os.SameFile(fi, kubelet) {
				break
			}
		}
		log.Printf("the kubelet restarted (%s or %s replaced): serving and registering again", kubeletSock, sock)
		s.Stop()
		s = nil
	}
}
