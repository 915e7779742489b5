// Whether an extracted entity name states a value rather than naming a thing: a date or year
// ("12 March 1987", "the 1980s", "1987-03-12"), a number ("3,200", "45%"), an amount ("$4.5
// million", "30 euros") or a quantity ("12 km", "3,200 members"). A real model extracts many of
// these from factual text (half of its entities on encyclopedic passages); they are attributes
// of the entities around them, so entity resolution does not ask a judge about them and a
// community made of one entity and its values gets no LLM report.
#pragma once

#include <string_view>

namespace grag {

// True when `name` holds a digit and every word of it is a number, a month or weekday, a scale
// word ("million"), a currency, a unit or counted noun ("km", "members"), or a date word ("the",
// "of", "AD", "early"). A literal `type` ("date", "number", "quantity", "money", "percent",
// "time", "year", "duration", "amount") allows one other word ("4.5 million units"). Names with a
// number that name a thing ("Windows 10", "Apollo 11", "1987 World Cup") are not values.
bool IsLiteralValue(std::string_view name, std::string_view type = {});

}  // namespace grag
