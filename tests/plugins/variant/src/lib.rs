//! The memory backend with one member swapped out.
//!
//! [`Memory<V>`] delegates every protocol member to
//! `tether_plugin_memory::MemoryBackend`, except the kind, `fork` and
//! `fingerprint`, which go through the [`Variant`] `V`. Each broken test plugin
//! is then a few lines: the one thing it does wrong.

use serde_json::Value;
use tether_plugin_memory::{Locator, MemoryBackend};
use tether_sdk::{
    Backend, Capability, Descriptor, Expected, Handle, HistoryEntry, ObjectDiff, PinRef, Result,
    Target, VerifyReport,
};

/// What a variant changes; the defaults behave like memory.
pub trait Variant: Default + 'static {
    /// The kind the variant reports.
    const KIND: &'static str;
    /// Capabilities it declares on top of memory's.
    const EXTRA_CAPABILITIES: &'static [Capability] = &[];

    fn fork(
        &self,
        memory: &MemoryBackend,
        locator: &Locator,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String> {
        memory.fork(locator, source, name, expected)
    }

    fn fingerprint(
        &self,
        memory: &MemoryBackend,
        locator: &Locator,
        working_ref: Option<&str>,
    ) -> Result<Value> {
        memory.fingerprint(locator, working_ref)
    }

    fn check_quiescence(
        &self,
        memory: &MemoryBackend,
        locator: &Locator,
        working_ref: Option<&str>,
    ) -> Result<()> {
        memory.check_quiescence(locator, working_ref)
    }
}

/// The memory backend under variant `V`.
#[derive(Default)]
pub struct Memory<V> {
    memory: MemoryBackend,
    variant: V,
}

impl<V: Variant> Backend for Memory<V> {
    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        let mut d = Descriptor {
            kind: V::KIND.to_owned(),
            ..self.memory.describe()
        };
        d.capabilities
            .extend(V::EXTRA_CAPABILITIES.iter().map(|c| c.as_str().to_owned()));
        d
    }

    fn check_quiescence(&self, locator: &Locator, working_ref: Option<&str>) -> Result<()> {
        self.variant
            .check_quiescence(&self.memory, locator, working_ref)
    }

    fn fork(
        &self,
        locator: &Locator,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String> {
        self.variant
            .fork(&self.memory, locator, source, name, expected)
    }

    fn fingerprint(&self, locator: &Locator, working_ref: Option<&str>) -> Result<Value> {
        self.variant.fingerprint(&self.memory, locator, working_ref)
    }

    // Everything below is plain delegation.

    fn configure(&mut self, config: Value) -> Result<()> {
        self.memory.configure(config)
    }

    fn validate_locator(&self, locator: &Locator) -> Result<()> {
        self.memory.validate_locator(locator)
    }

    fn identity(&self, locator: &Locator) -> Result<Value> {
        self.memory.identity(locator)
    }

    fn effective_capabilities(&self, locator: &Locator, policy: &Value) -> Result<Vec<String>> {
        self.memory.effective_capabilities(locator, policy)
    }

    fn pin(&self, locator: &Locator, state: &Value, pin_id: &str) -> Result<PinRef> {
        self.memory.pin(locator, state, pin_id)
    }

    fn unpin(&self, locator: &Locator, pin: &PinRef) -> Result<()> {
        self.memory.unpin(locator, pin)
    }

    fn list_pins(&self, locator: &Locator) -> Result<Vec<String>> {
        self.memory.list_pins(locator)
    }

    fn verify(
        &self,
        locator: &Locator,
        state: &Value,
        pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        self.memory.verify(locator, state, pin, deep)
    }

    fn delete_working_ref(&self, locator: &Locator, working_ref: &str) -> Result<()> {
        self.memory.delete_working_ref(locator, working_ref)
    }

    fn working_ref_blockers(&self, locator: &Locator, working_ref: &str) -> Result<Option<String>> {
        self.memory.working_ref_blockers(locator, working_ref)
    }

    fn list_working_refs(&self, locator: &Locator) -> Result<Vec<String>> {
        self.memory.list_working_refs(locator)
    }

    fn promote(&self, locator: &Locator, source: &Target, expected: &Expected) -> Result<Value> {
        self.memory.promote(locator, source, expected)
    }

    fn merge(
        &self,
        locator: &Locator,
        source: &Target,
        message: &str,
        expected: &Expected,
    ) -> Result<Value> {
        self.memory.merge(locator, source, message, expected)
    }

    fn ancestor_of(
        &self,
        locator: &Locator,
        ancestor: &Value,
        descendant: &Value,
    ) -> Result<Option<bool>> {
        self.memory.ancestor_of(locator, ancestor, descendant)
    }

    fn open(&self, locator: &Locator, target: &Target, read_only: bool) -> Result<Handle> {
        self.memory.open(locator, target, read_only)
    }

    fn history(
        &self,
        locator: &Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        self.memory.history(locator, from_ref, limit)
    }

    fn diff(
        &self,
        locator: &Locator,
        a: &Value,
        b: &Value,
        la: Option<&str>,
        lb: Option<&str>,
    ) -> Result<ObjectDiff> {
        self.memory.diff(locator, a, b, la, lb)
    }

    fn listing(&self, locator: &Locator, state: &Value) -> Result<Option<String>> {
        self.memory.listing(locator, state)
    }

    fn create(&self, locator: &Locator, owner: &str) -> Result<Value> {
        self.memory.create(locator, owner)
    }

    fn owner(&self, locator: &Locator) -> Result<Option<String>> {
        self.memory.owner(locator)
    }

    fn is_ref_empty(&self, locator: &Locator, ignoring: &[String]) -> Result<Option<bool>> {
        self.memory.is_ref_empty(locator, ignoring)
    }

    fn delete_store(&self, locator: &Locator, owner: &str) -> Result<()> {
        self.memory.delete_store(locator, owner)
    }
}
