//! Plans: actions, preconditions, digest, rendering.
