//! The tables that are a record kind's own: filled from its records alone,
//! each shown in `stats` and in `stats --json`. A kind's table is listed
//! once, in `lib.rs`'s `kind_tables!`, and needs no line in the text or
//! JSON writers. The trait is declared here, with the tables; each
//! table's text and JSON (its impl) is in [`crate::show::tables`].

use serde_json::{Map, Value};

/// A kind's own table.
pub trait KindTable: Default {
    /// Its key in `stats --json`.
    const KEY: &'static str;
    fn to_json(&self) -> Value;
    /// Its section of `stats`: the first `top` rows; `who` names a pid.
    /// Nothing when it holds nothing.
    fn render(&self, o: &mut String, top: usize, who: &dyn Fn(u32) -> String);
}

/// `Tables`, one field per kind table, shown in the order listed.
macro_rules! kind_tables {
    ($($(#[$doc:meta])* $field:ident: $ty:ty),* $(,)?) => {
        /// The kinds' own tables (see [`kind_tables::KindTable`]).
        #[derive(Default)]
        pub struct Tables {
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl Tables {
            /// Each table under its key.
            pub(crate) fn json(&self, into: &mut serde_json::Map<String, serde_json::Value>) {
                $($crate::acc::kind_tables::insert(into, &self.$field);)*
            }

            /// Each table's section, in order.
            pub(crate) fn render(&self, o: &mut String, top: usize, who: &dyn Fn(u32) -> String) {
                $($crate::acc::kind_tables::KindTable::render(&self.$field, o, top, who);)*
            }
        }
    };
}
pub(crate) use kind_tables;

pub(crate) fn insert<T: KindTable>(into: &mut Map<String, Value>, t: &T) {
    let old = into.insert(T::KEY.into(), t.to_json());
    debug_assert!(old.is_none(), "two tables under {}", T::KEY);
}
