{% macro line_amount(price, quantity, discount) -%}
CAST({{ price }} * {{ quantity }} * (1 - COALESCE({{ discount }}, 0)) AS DECIMAL(18, 2))
{%- endmacro %}
