// Literal values among extracted names: dates, numbers, amounts and quantities, not things.
#include "grag/literal_value.h"

#include <gtest/gtest.h>

namespace grag {
namespace {

TEST(LiteralValueTest, DatesNumbersAmountsAndQuantitiesAreValues) {
  for (const char* name : {"1987",
                           "12 March 1987",
                           "March 12, 1987",
                           "the 1980s",
                           "1987-03-12",
                           "12/03/1987",
                           "3,200",
                           "4.5",
                           "45%",
                           "$4.5 million",
                           "4.5 million dollars",
                           "€30",
                           "£1,200",
                           "12 km",
                           "3,200 members",
                           "2 hours",
                           "19th century",
                           "early 1990s",
                           "1914–1918",
                           "May 1968",
                           "12th",
                           "300,000 inhabitants"}) {
    EXPECT_TRUE(IsLiteralValue(name)) << name;
  }
}

TEST(LiteralValueTest, NamesWithNumbersAreThings) {
  for (const char* name : {"Windows 10", "Apollo 11", "1987 World Cup", "Route 66", "F-16", "G7",
                           "Catch-22", "Studio 54", "1st Battalion", "Jacob Marley", "March",
                           "the Thirty Years' War", "Christmas Day", ""}) {
    EXPECT_FALSE(IsLiteralValue(name)) << name;
  }
}

TEST(LiteralValueTest, ALiteralTypeAllowsOneOtherWord) {
  EXPECT_FALSE(IsLiteralValue("4.5 million widgets"));
  EXPECT_TRUE(IsLiteralValue("4.5 million widgets", "QUANTITY"));
  EXPECT_FALSE(IsLiteralValue("4.5 million blue widgets", "quantity"));
  EXPECT_FALSE(IsLiteralValue("Windows 10", "person"));
}

}  // namespace
}  // namespace grag
