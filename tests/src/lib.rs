//! Shared test support: a loopback HTTP server with fault injection, tarball builders (to be written).
