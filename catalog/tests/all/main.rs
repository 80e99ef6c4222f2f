//! Integration tests of `tandem-catalog`: the converters on the vendored sources in `data/` and
//! the committed catalogs in `data/catalogs/`.

mod vendored;
