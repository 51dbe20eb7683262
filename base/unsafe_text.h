// Which characters are unsafe in text that one user writes and another
// reads: control characters (C0, DEL, C1), Unicode's bidi controls, the
// invisible characters and line separators, and bytes that are not UTF-8. On
// a terminal an ESC or a C1 control starts a sequence that can set the title,
// write the clipboard or clear the screen; in a browser a bidi override
// (U+202E) reverses the text around it; U+2028 breaks a line where no line
// break is shown, and U+200B or a tag character (U+E0041) makes two
// different names look the same, or hides text in one. The service
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

// Characters that show nothing or break a line: the soft hyphen U+00AD, the
// combining grapheme joiner U+034F, the Hangul fillers U+115F, U+1160,
// U+3164, U+FFA0, the Khmer vowels U+17B4, U+17B5, the Mongolian selectors
// and separator U+180B..U+180F, the zero-width space, non-joiner and joiner
// U+200B..U+200D, the line and paragraph separators U+2028, U+2029, the
// word joiner and invisible operators U+2060..U+2064, the deprecated format
// characters U+206A..U+206F, the zero-width no-break space U+FEFF, the
// interlinear annotations U+FFF9..U+FFFB, the shorthand format controls
// U+1BCA0..U+1BCA3 and the tag characters U+E0000..U+E007F.
bool IsInvisibleOrLineSeparator(uint32_t code_point);

// Any of the above: what tfctl and the dashboard show as an escape.
bool IsUnsafeCodePoint(uint32_t code_point);

// Why `text` is not safe to show another user, naming the first offending
// character and its byte offset ("U+202E, a bidi control, at byte 4"), or
// nullopt when it is valid UTF-8 without any of the characters above.
std::optional<std::string> UnsafeCharacter(std::string_view text);

// What UnsafeCharacter allows, for error messages.
inline constexpr const char* kSafeTextRule =
    "valid UTF-8 without control characters (C0, DEL, C1), bidi controls (U+061C, U+200E, "
    "U+200F, U+202A-U+202E, U+2066-U+2069), invisible characters or line separators (such as "
    "U+200B, U+2028, U+FEFF; base/unsafe_text.h lists them)";

// The offset of the first byte of `text` that is not part of a well-formed
// UTF-8 sequence, or nullopt when it is all UTF-8.
std::optional<size_t> FirstInvalidUtf8(std::string_view text);

// `text` made valid UTF-8: each byte that is not part of a well-formed
// sequence becomes the four characters \xNN (text from a program may be in
// any encoding; what is stored and sent on must be UTF-8).
std::string EscapeInvalidUtf8(std::string_view text);

}  // namespace tfslurm
