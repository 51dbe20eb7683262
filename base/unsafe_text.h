// Which characters are unsafe in text that one user writes and another
// reads: control characters (C0, DEL, C1), Unicode's bidi controls, and bytes
// that are not UTF-8. On a terminal an ESC or a C1 control starts a sequence
// that can set the title, write the clipboard or clear the screen; in a
// browser a bidi override (U+202E) reverses the text around it. The service
// refuses such characters where text comes in (spec paths, scalar tags,
// checkpoint paths read from files); tfctl escapes them where text goes out
// (client/terminal_text.h). Both decide with these functions.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tfslurm {

// The length of the well-formed UTF-8 sequence at text[i] (1 to 4) and its
// code point; 0 when the bytes there are not one (an overlong form, a
// surrogate, beyond U+10FFFF, a stray continuation byte). `truncated` is set
// when the bytes are a valid beginning that the end of `text` cuts short.
size_t DecodeUtf8(std::string_view text, size_t i, uint32_t& code_point, bool& truncated);

// C0 (U+0000..U+001F), DEL (U+007F) and C1 (U+0080..U+009F).
bool IsControlCharacter(uint32_t code_point);
// ALM (U+061C), LRM and RLM (U+200E, U+200F), the embeddings and overrides
// U+202A..U+202E and the isolates U+2066..U+2069 (Unicode's UAX #9).
bool IsBidiControl(uint32_t code_point);

// Why `text` is not safe to show another user, naming the first offending
// character and its byte offset ("U+202E, a bidi control, at byte 4"), or
// nullopt when it is valid UTF-8 without control characters or bidi controls.
std::optional<std::string> UnsafeCharacter(std::string_view text);

// What UnsafeCharacter allows, for error messages.
inline constexpr const char* kSafeTextRule =
    "valid UTF-8 without control characters (C0, DEL, C1) or bidi controls (U+061C, U+200E, "
    "U+200F, U+202A-U+202E, U+2066-U+2069)";

}  // namespace tfslurm
