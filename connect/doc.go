// Package connect reaches the servers a Config names: it parses a URL
// into a Config (ParseURL), checks it, and builds the Nodes a strategy
// runs on (Dial), on go-redis or valkey-go clients it owns, over TCP or
// TLS, to one server, N independent masters, the master a set of
// Sentinels names, or a Redis Cluster. dlock.Open and dlock.OpenURL use
// it; a program that builds its own Nodes (node/goredis, node/valkeygo)
// and calls single.New or quorum.New never links it, nor the client
// libraries it builds.
package connect
