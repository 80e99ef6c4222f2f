//! Conversions between wit-bindgen's types and [`tandem_api`]'s, generated from one list.

tandem_api::mirror_contract!(crate::bindings::tandem::engine::types);

/// Converts every element of a list to its twin.
pub(crate) fn all<A: Into<B>, B>(items: Vec<A>) -> Vec<B> {
    items.into_iter().map(Into::into).collect()
}
